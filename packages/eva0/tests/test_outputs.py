"""Model outputs other than a bare tensor: `.logits` objects, mappings, tuples."""

from dataclasses import dataclass

import pytest
import torch

from eva0 import EVA0
from eva0.baselines import DeYO, NoAdapt, Tent
from eva0.models import tiny_vit
from eva0.outputs import as_logits


@dataclass
class HFOutput:  # the shape of transformers' ImageClassifierOutput
    logits: torch.Tensor
    hidden_states: tuple | None = None


class Wrapped(torch.nn.Module):
    """Returns the inner model's logits inside another container."""

    def __init__(self, inner, kind):
        super().__init__()
        self.inner, self.kind = inner, kind

    def forward(self, x):
        f = self.inner(x)
        if self.kind == "logits":
            return HFOutput(logits=f)
        if self.kind == "dict":
            return {"logits": f, "aux": f.sum()}
        if self.kind == "tuple":
            return (f, f.sum())
        return "not logits"


def _vit():
    return tiny_vit(
        8, 4, 1, 10, embed_dim=16, depth=2, num_heads=2, generator=torch.Generator().manual_seed(0)
    ).eval()


def _img(B=8):
    return torch.rand(B, 1, 8, 8, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("kind", ["logits", "dict", "tuple"])
def test_eva0_on_wrapped_outputs_equals_plain_model(kind, make_mlp):
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(1))
    plain, wrapped = EVA0(make_mlp()), EVA0(Wrapped(make_mlp(), kind))
    for _ in range(3):
        torch.testing.assert_close(wrapped(x), plain(x), rtol=0, atol=0)
    assert wrapped.stats.updates == 3


@pytest.mark.parametrize("kind", ["logits", "tuple"])
def test_vmap_path_accepts_wrapped_outputs(kind, make_mlp):
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(1))
    names = ["3.bias"]  # a Linear bias: not a norm affine, so the vmap path runs
    plain = EVA0(make_mlp(), params=names)
    wrapped = EVA0(Wrapped(make_mlp(), kind), params=[f"inner.{n}" for n in names])
    assert wrapped.mode == "vmap"
    torch.testing.assert_close(wrapped(x), plain(x), rtol=1e-6, atol=1e-6)
    assert wrapped.mode == "vmap"  # no fallback to shared directions


@pytest.mark.parametrize("kind", ["logits", "dict", "tuple"])
def test_baselines_accept_wrapped_outputs(kind):
    x = _img()
    for make in (NoAdapt, lambda m: Tent(m, lr=0.1), lambda m: DeYO(m, lr=0.1)):
        plain_model, wrapped_model = _vit(), _vit()
        for p in (*plain_model.parameters(), *wrapped_model.parameters()):
            p.requires_grad_(True)
        plain, wrapped = make(plain_model), make(Wrapped(wrapped_model, kind))
        torch.testing.assert_close(wrapped(x), plain(x))
        torch.testing.assert_close(wrapped(x), plain(x))  # after one adaptation step


def test_as_logits_rejects_outputs_without_logits(make_mlp):
    with pytest.raises(TypeError, match=r"must return logits.*got str"):
        as_logits("not logits")
    with pytest.raises(TypeError, match="got tuple"):
        as_logits(())
    with pytest.raises(TypeError, match="got str"):
        EVA0(Wrapped(make_mlp(), "bad"))(torch.randn(4, 6))
