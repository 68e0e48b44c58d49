"""Source models of the benchmarks, trained from scratch on clean 16x16 digits.

Three model kinds, so that EVA-0's defaults are checked where users put it:

* ``vit``: the spec's timm ``VisionTransformer`` (img 16, patch 4, dim 64, depth 4, 4 heads,
  mlp 2), LayerNorm affines adapted;
* ``cnn_bn``: a 3-conv CNN with BatchNorm (eval mode, running statistics), BN affines adapted;
* ``cnn_gn``: the same CNN with GroupNorm (4 groups), GN affines adapted.

Script helpers, not part of the wheel.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from eva0.models import timm_vit, tiny_vit
from methodkit.torch import generator

KINDS = ["vit", "cnn_bn", "cnn_gn"]
EPOCHS = {"vit": 30, "cnn_bn": 10, "cnn_gn": 10}


def small_cnn(norm: str, num_classes: int = 10) -> nn.Module:
    """conv(1->16)-conv(16->32, /2)-conv(32->64, /2), each followed by a norm and ReLU, GAP."""

    def block(cin: int, cout: int, stride: int) -> list[nn.Module]:
        layer = nn.BatchNorm2d(cout) if norm == "bn" else nn.GroupNorm(4, cout)
        return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), layer, nn.ReLU()]

    return nn.Sequential(
        *block(1, 16, 1),
        *block(16, 32, 2),
        *block(32, 64, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, num_classes),
    )


def build(kind: str, use_timm: bool = True) -> nn.Module:
    """A fresh, untrained model of ``kind`` (initialised from torch's global seed).

    ``use_timm=False`` builds the ViT as the identical :class:`eva0.models.TinyViT`: ``--quick``
    uses it so that the smoke run does not import timm (10-30 s on a busy core).
    """
    if kind == "vit":
        cfg = {"embed_dim": 64, "depth": 4, "num_heads": 4, "mlp_ratio": 2.0}
        return timm_vit(16, 4, 1, 10, **cfg) if use_timm else tiny_vit(16, 4, 1, 10, **cfg)
    if kind in ("cnn_bn", "cnn_gn"):
        return small_cnn(kind[-2:])
    raise ValueError(f"unknown model kind {kind!r}; expected one of {KINDS}")


def freeze_all_but_norms(model: nn.Module) -> nn.Module:
    """Eval mode; only norm affines require grad (what the BP baselines adapt)."""
    model.eval()
    norm_types = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)
    for p in model.parameters():
        p.requires_grad_(False)
    for m in model.modules():
        if isinstance(m, norm_types):
            for p in m.parameters(recurse=False):
                p.requires_grad_(True)
    return model


def train(
    kind: str, Xtr: Any, ytr: Any, epochs: int, seed: int = 0, use_timm: bool = True
) -> nn.Module:
    """AdamW (lr 3e-3, wd 0.05, one-cycle, batch 64) on clean train images, then frozen."""
    torch.manual_seed(seed)
    gen = generator(seed)
    model = build(kind, use_timm)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    steps = epochs * math.ceil(len(ytr) / 64)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(ytr), generator=gen)
        for i in range(0, len(ytr), 64):
            idx = perm[i : i + 64]
            loss = nn.functional.cross_entropy(model(Xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return freeze_all_but_norms(model)


_TRAINED: dict[tuple[str, int, bool], dict[str, torch.Tensor]] = {}


def trained(kind: str, Xtr: Any, ytr: Any, epochs: int, use_timm: bool = True) -> nn.Module:
    """:func:`train` once per (kind, epochs, use_timm) in this process; later calls reload."""
    key = (kind, epochs, use_timm)
    if key not in _TRAINED:
        net = train(kind, Xtr, ytr, epochs, use_timm=use_timm)
        _TRAINED[key] = {k: v.clone() for k, v in net.state_dict().items()}
    model = build(kind, use_timm)
    model.load_state_dict(_TRAINED[key])
    return freeze_all_but_norms(model)


def timm_to_tiny_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a timm ViT state dict to :class:`eva0.models.TinyViT`'s (same maths).

    The memory measurement runs in spawned processes; a TinyViT there avoids counting the
    import of timm (and torchvision) as memory of the method.
    """
    out = {}
    for k, v in state.items():
        k = k.replace("attn.qkv.", "attn.in_proj_").replace("attn.proj.", "attn.out_proj.")
        k = k.replace("mlp.fc1.", "mlp.0.").replace("mlp.fc2.", "mlp.2.")
        out[k] = v
    return out
