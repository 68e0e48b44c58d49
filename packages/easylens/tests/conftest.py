"""Tiny random-init encoders and banks shared by the easylens tests (fixtures)."""

import pytest
import torch
from torch.nn import functional as nnf

from easylens import EasyBank, ScanGenerator, tiny_clip_adapter
from easylens.synthetic import TinyCLIP


@pytest.fixture(scope="module")
def tiny():
    """A small random-init TinyCLIP (width 16, 3 blocks) and its adapter."""
    model = TinyCLIP(width=16, depth=3, heads=2, embed_dim=16, seed=0).eval().requires_grad_(False)
    return model, tiny_clip_adapter(model)


@pytest.fixture(scope="module")
def scans():
    gen = ScanGenerator(seed=0)
    return {
        "normal": gen.sample(12, "normal"),
        "lesion": gen.sample(6, "obvious"),
        "subtle": gen.sample(4, "subtle"),
    }


@pytest.fixture(scope="module")
def bank(tiny, scans):
    return EasyBank.build(tiny[1], scans["normal"].images, scans["lesion"].images, layer=1, seed=0)


@pytest.fixture
def images(scans):
    return torch.cat([scans["subtle"].images, scans["normal"].images[:2]])


def _make_bank(normal_feats, protos, grid, reference="position", n_refs=1, width=None, window=1):
    width = normal_feats.shape[-1] if width is None else width
    groups = grid[0] * grid[1] if reference == "position" else len(normal_feats)
    return EasyBank(
        layer=1,
        reference=reference,
        window=window,
        grid_size=grid,
        num_prefix_tokens=0,
        width=width,
        feature_space="token",
        backbone_id="test",
        seed=0,
        n_references=n_refs,
        lesion_sources=("exemplars",),
        normal_feats=nnf.normalize(normal_feats, dim=-1),
        normal_tokens={1: nnf.normalize(normal_feats, dim=-1)},
        lesion_protos=nnf.normalize(protos, dim=-1),
        lesion_protos_tokens=nnf.normalize(protos, dim=-1),
        margin_mu=torch.zeros(groups),
        margin_sigma=torch.ones(groups),
        lesion_mu=torch.zeros(groups),
        lesion_sigma=torch.ones(groups),
    )


@pytest.fixture
def make_bank():
    """Build an EasyBank by hand from unit normal references and prototypes."""
    return _make_bank
