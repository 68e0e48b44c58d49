"""A real medical image path: files that ship with pydicom and scikit-image, no download.

A CT slice (``CT_small.dcm``, pydicom's test data) and the fundus photograph
``skimage.data.retina()`` go through the preprocessing a user would write (Hounsfield units and
a window for CT, [0, 1] scaling for RGB, resize, grayscale to 3 channels, CLIP normalisation)
into a tiny random-init open_clip model wrapped by :class:`OpenCLIPAdapter`, then
``EasyLens.explain``. Random weights: this tests the path, not detection quality.
"""

import pytest
import torch
from torch.nn import functional as nnf

from easylens import EasyBank, EasyLens, EasyTag, OpenCLIPAdapter, ZeroShotDetector

SIZE = 32
MEAN = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
STD = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)


def _ct_slice() -> torch.Tensor:
    """``[1, 1, H, W]`` in [0, 1]: Hounsfield units in a soft-tissue window (W 400, L 40)."""
    pydicom = pytest.importorskip("pydicom")
    from pydicom.data import get_testdata_file

    ds = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    assert ds.Modality == "CT"
    hu = torch.as_tensor(ds.pixel_array.astype("float32"))
    hu = hu * float(getattr(ds, "RescaleSlope", 1)) + float(getattr(ds, "RescaleIntercept", 0))
    return ((hu - (40 - 200)) / 400).clamp(0, 1)[None, None]


def _retina() -> torch.Tensor:
    """``[1, 3, H, W]`` in [0, 1] from the uint8 RGB fundus photograph."""
    data = pytest.importorskip("skimage.data")
    rgb = torch.as_tensor(data.retina())  # (1411, 1411, 3) uint8
    assert rgb.dtype == torch.uint8
    return rgb.permute(2, 0, 1)[None].float() / 255


def _views(img: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """``n`` random crops (70-100 % of the side) resized to SIZE, 3 channels, normalised."""
    gen = torch.Generator().manual_seed(seed)
    h, w = img.shape[-2:]
    out = []
    for _ in range(n):
        side = int(min(h, w) * (0.7 + 0.3 * torch.rand((), generator=gen)))
        y = int(torch.randint(0, h - side + 1, (), generator=gen))
        x = int(torch.randint(0, w - side + 1, (), generator=gen))
        crop = img[:, :, y : y + side, x : x + side]
        out.append(nnf.interpolate(crop, size=(SIZE, SIZE), mode="bilinear", antialias=True))
    x = torch.cat(out).expand(-1, 3, -1, -1)  # grayscale CT -> the model's 3 channels
    return (x - MEAN) / STD


@pytest.mark.slow  # importing open_clip alone takes ~20 s on a busy machine
def test_ct_slice_and_retina_through_explain():
    ct, retina = _ct_slice(), _retina()
    open_clip = pytest.importorskip("open_clip")
    torch.manual_seed(0)
    model = open_clip.CLIP(
        embed_dim=16,
        vision_cfg=open_clip.CLIPVisionCfg(
            layers=3, width=32, head_width=16, patch_size=8, image_size=SIZE
        ),
        text_cfg=open_clip.CLIPTextCfg(
            context_length=8, vocab_size=64, width=32, heads=2, layers=1
        ),
    ).eval()

    def tok(texts):
        ids = [[(sum(map(ord, w)) % 62) + 1 for w in t.split()][:8] for t in texts]
        return torch.tensor([i + [0] * (8 - len(i)) for i in ids])

    adapter = OpenCLIPAdapter(model, tok)
    # raw files give clear errors, not numpy/torch internals
    with pytest.raises(TypeError, match="images must be a floating-point tensor"):
        adapter.encode_image(torch.as_tensor(pytest.importorskip("skimage.data").retina())[None])
    with pytest.raises(ValueError, match=r"images have 1 channel\(s\) .* takes 3 \(grayscale\?"):
        adapter.encode_image(nnf.interpolate(ct, size=(SIZE, SIZE)))

    normal = _views(ct, 8, seed=0)  # CT views as the "normal" reference set
    lesion = _views(retina, 4, seed=1)  # another image as the lesion exemplar source
    bank = EasyBank.build(adapter, normal, lesion, layer=1, n_lesion_prototypes=2)
    images = torch.cat([_views(ct, 2, seed=2), _views(retina, 2, seed=3)])
    pos, neg = ["a lesion in the scan"], ["a normal scan"]
    for tag in (EasyTag(calibrated=False), EasyTag(calibrated=False, verify=True, max_verify=4)):
        lens = EasyLens(adapter, bank, tag=tag, prompts=(pos, neg))
        rep = lens.explain(images)
        assert rep.tag.selected.shape == (4, 4, 4)
        assert rep.g_lens.shape == rep.g_plain.shape == (4, 16)
        assert torch.isfinite(rep.g_lens).all()
        torch.testing.assert_close(rep.g_plain, model.encode_image(images), atol=1e-5, rtol=0)
        untouched = rep.n_selected == 0
        torch.testing.assert_close(rep.g_lens[untouched], rep.g_plain[untouched], atol=1e-6, rtol=0)
        assert bool((rep.g_lens[~untouched] != rep.g_plain[~untouched]).any(-1).all())
    scores = ZeroShotDetector(EasyLens(adapter, bank), pos, neg).decision_function(images)
    assert scores.shape == (4,)
    assert all(not m._forward_pre_hooks for m in model.modules())
