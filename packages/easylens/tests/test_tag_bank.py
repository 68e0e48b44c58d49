import numpy as np
import pytest
import torch

from easylens import EasyBank, EasyTag
from easylens.tag import cap_top_k
from reference import margin_reference


def _bank_refs(bank):
    return bank.normal_feats.reshape(bank.n_references, bank.num_patches, -1).double().numpy()


def test_margin_matches_double_loop_position(tiny, bank, scans):
    tokens = tiny[1].tokens_at(scans["subtle"].images[:2], 1)
    res = EasyTag(calibrated=False)(tokens, bank)
    for b in range(2):
        z = tokens[b, 1:].double().numpy()
        c, e_n = margin_reference(
            z, bank.lesion_protos.numpy(), _bank_refs(bank), bank.grid_size, 1
        )
        np.testing.assert_allclose(res.margin[b].flatten().numpy(), c, atol=1e-6)
        np.testing.assert_allclose(res.normal_evidence[b].flatten().numpy(), e_n, atol=1e-6)


def test_margin_matches_double_loop_cluster(tiny, scans):
    adapter = tiny[1]
    bank = EasyBank.build(
        adapter,
        scans["normal"].images,
        scans["lesion"].images,
        layer=2,
        reference="cluster",
        n_normal_clusters=6,
        seed=1,
    )
    tokens = adapter.tokens_at(scans["subtle"].images[:1], 2)
    res = EasyTag(calibrated=False)(tokens, bank)
    c, _ = margin_reference(
        tokens[0, 1:].double().numpy(),
        bank.lesion_protos.numpy(),
        bank.normal_feats.numpy(),
        bank.grid_size,
        None,
    )
    np.testing.assert_allclose(res.margin[0].flatten().numpy(), c, atol=1e-6)


def test_position_mode_uses_only_the_window(make_bank):
    # grid 1 x 5, one reference image; the token at 0 equals the reference at position 4
    # (outside its window): the counterfactual must ignore it
    d = 5
    refs = torch.eye(d)  # reference at position j is e_j
    bank = make_bank(refs, torch.ones(1, d), (1, 5))
    z = torch.zeros(1, 5, d)
    z[0, 0] = refs[4]
    z[0, 1:] = refs[1:]
    res = EasyTag(calibrated=False)(z, bank)
    assert res.normal_evidence[0, 0, 0] == pytest.approx(
        0.0, abs=1e-7
    )  # e_0, e_1 are orthogonal to e_4
    assert res.normal_evidence[0, 0, 3] == pytest.approx(1.0)
    assert int(res.counterfactual_index[0, 3]) == 3


def test_planted_token_is_exactly_selected(make_bank):
    d = 8
    normal, lesion = torch.zeros(2, d), torch.zeros(1, d)
    normal[0, 0], normal[1, 1], lesion[0, 2] = 1, 1, 1
    bank = make_bank(normal, lesion, (4, 4), reference="cluster")
    z = normal[0].repeat(1, 16, 1) * 3.0
    z[0, 9] = lesion[0] * 2.0
    for tag in (EasyTag(calibrated=False), EasyTag(threshold=0.5)):
        sel = tag(z, bank).selected.flatten()
        assert sel.nonzero().flatten().tolist() == [9]


def test_k_max_caps_to_the_highest_scores():
    mask = torch.tensor([[True, True, True, False]])
    score = torch.tensor([[0.1, 0.9, 0.5, 2.0]])
    assert cap_top_k(mask, score, 2).tolist() == [[False, True, True, False]]
    assert cap_top_k(mask, score, None).tolist() == mask.tolist()


def test_save_load_round_trip_and_deterministic_build(tiny, bank, scans, tmp_path):
    bank.save(tmp_path / "bank.pt")
    loaded = EasyBank.load(tmp_path / "bank.pt")
    for name in ("normal_feats", "lesion_protos", "margin_mu", "margin_sigma"):
        assert torch.equal(getattr(bank, name), getattr(loaded, name))
    assert torch.equal(bank.normal_tokens[1], loaded.normal_tokens[1])
    assert (loaded.layer, loaded.grid_size, loaded.backbone_id) == (
        bank.layer,
        bank.grid_size,
        bank.backbone_id,
    )
    again = EasyBank.build(tiny[1], scans["normal"].images, scans["lesion"].images, layer=1, seed=0)
    assert torch.equal(again.lesion_protos, bank.lesion_protos)
    assert torch.equal(again.margin_sigma, bank.margin_sigma)


def test_mask_and_text_sources(tiny, scans):
    adapter = tiny[1]
    les = scans["lesion"]
    bank = EasyBank.build(
        adapter, scans["normal"].images, les.images, lesion_masks=les.pixel_mask, layer=1
    )
    assert bank.lesion_sources == ("exemplars", "masks")
    joint = EasyBank.build(
        adapter,
        scans["normal"].images,
        lesion_texts=["chest scan with a round lesion in the left lung"],
    )
    assert joint.feature_space == "joint"
    assert joint.lesion_protos.shape == (1, 16)
    with pytest.raises(ValueError, match="joint-space bank needs features"):
        EasyTag()(adapter.tokens_at(les.images[:1], joint.layer), joint)
