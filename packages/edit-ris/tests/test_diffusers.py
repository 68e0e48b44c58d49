"""diffusers plumbing on a random-init tiny InstructPix2Pix pipeline built from configs."""

import os

import numpy as np
import pytest
import torch

from edit_ris import Capture, CaptureError, DiffusersIP2PBackbone, EditRIS, expression_token_span

pytestmark = pytest.mark.slow  # builds a tiny pipeline (~6 s)

diffusers = pytest.importorskip("diffusers")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ["make", "the", "red", "circle", "square", "small", "blue", "left", "of", "purple"]


def word_tokenizer(max_length=12):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[BOS]", "[EOS]", "[UNK]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[BOS] $A [EOS]", special_tokens=[("[BOS]", 1), ("[EOS]", 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="[BOS]",
        eos_token="[EOS]",
        pad_token="[PAD]",
        unk_token="[UNK]",
        model_max_length=max_length,
    )


@pytest.fixture(scope="module")
def pipe():
    os.environ["HF_HUB_OFFLINE"] = "1"
    from diffusers import (
        AutoencoderKL,
        EulerAncestralDiscreteScheduler,
        StableDiffusionInstructPix2PixPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=8,
        in_channels=8,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16,
        attention_head_dim=4,
        norm_num_groups=8,
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        norm_num_groups=8,
        sample_size=16,
    )
    tok = word_tokenizer()
    text = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_attention_heads=2,
            num_hidden_layers=1,
            max_position_embeddings=tok.model_max_length,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        )
    )
    p = StableDiffusionInstructPix2PixPipeline(
        vae=vae,
        text_encoder=text,
        tokenizer=tok,
        unet=unet,
        scheduler=EulerAncestralDiscreteScheduler(),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    p.set_progress_bar_config(disable=True)
    return p


def _images(n=2, size=16):
    return torch.rand(n, 3, size, size, generator=torch.Generator().manual_seed(0))


def test_predict_end_to_end_and_single_call(pipe):
    bb = DiffusersIP2PBackbone(pipe)
    calls = []
    orig = pipe.unet.forward

    def counting(*a, **k):
        calls.append(1)
        return orig(*a, **k)

    ris = EditRIS(bb)
    pipe.unet.forward = counting
    try:
        out = ris.predict(_images(), ["the red circle", "the small blue square"])
    finally:
        del pipe.unet.forward
    assert len(calls) == 1  # one batched UNet evaluation for the two expressions
    assert out.masks.shape == (2, 16, 16)
    assert out.masks.dtype == torch.bool
    assert torch.isfinite(out.soft).all()
    assert ris.resolved_timestep == bb.timesteps(20)[0]


def test_cross_attention_rows_sum_to_one_and_capture_does_not_change_eps(pipe):
    bb = DiffusersIP2PBackbone(pipe)
    ris = EditRIS(bb)
    x = _images()
    instr = ["make the red circle red", "make the blue square red"]
    t = bb.earliest_timestep()
    cap = bb.forward_capture(x, instr, t, 0, capture=ris.capture_spec())
    plain = bb.forward_capture(x, instr, t, 0, capture=None)
    assert cap.cross_attn
    for att in cap.cross_attn.values():
        torch.testing.assert_close(att.sum(-1), torch.ones_like(att.sum(-1)), atol=1e-5, rtol=0)
    torch.testing.assert_close(cap.eps, plain.eps, atol=1e-6, rtol=0)


def test_processors_restored_even_if_forward_raises(pipe):
    bb = DiffusersIP2PBackbone(pipe)
    before = {k: type(v) for k, v in pipe.unet.attn_processors.items()}
    spec = EditRIS(bb).capture_spec()
    with pytest.raises(RuntimeError, match="boom"), bb.capturing(spec, Capture()):
        raise RuntimeError("boom")
    assert {k: type(v) for k, v in pipe.unet.attn_processors.items()} == before


def test_backbone_is_not_modified(pipe):
    bb = DiffusersIP2PBackbone(pipe)
    state = {k: v.clone() for k, v in pipe.unet.state_dict().items()}
    sched_t = pipe.scheduler.timesteps
    EditRIS(bb).predict(_images(1), ["the red circle"])
    for k, v in pipe.unet.state_dict().items():
        assert torch.equal(v, state[k])
    assert pipe.scheduler.timesteps is sched_t


def test_fused_processor_is_refused(pipe):
    from diffusers.models.attention_processor import FusedAttnProcessor2_0

    original = dict(pipe.unet.attn_processors)
    name = next(iter(original))
    pipe.unet.set_attn_processor({**original, name: FusedAttnProcessor2_0()})
    try:
        with pytest.raises(CaptureError, match="cannot be captured"):
            DiffusersIP2PBackbone(pipe)
    finally:
        pipe.unet.set_attn_processor(original)


def test_word_tokenizer_span_and_size_multiple(pipe):
    bb = DiffusersIP2PBackbone(pipe)
    assert expression_token_span(
        pipe.tokenizer, "make the small blue square red", "small blue square"
    ) == [3, 4, 5]
    with pytest.raises(ValueError, match="multiple"):
        EditRIS(bb).predict(np.random.default_rng(0).random((1, 3, 14, 14)), ["the red circle"])
