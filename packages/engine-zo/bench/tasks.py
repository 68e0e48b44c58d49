"""The two forward-pass benchmark tasks of the spec (A: digits MLP, B: token-count transformer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Task:
    name: str
    model_fn: Callable[[], torch.nn.Module]
    loss_fn: Callable[[torch.nn.Module], torch.Tensor]
    target: float
    info: dict


def _init(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.reset_parameters()
    return model


def digits_task(n: int = 512, target: float = 0.8) -> Task:
    """Task A: first ``n`` sklearn digits in [0, 1], MLP 64-64-64-10 (tanh), fixed init."""
    from methodkit.data import load_digits_arrays

    X, y = load_digits_arrays()[:2]
    X = torch.tensor(np.asarray(X[:n]) / 16.0, dtype=torch.float32)
    y = torch.tensor(np.asarray(y[:n]), dtype=torch.long)

    def model_fn() -> torch.nn.Module:
        torch.manual_seed(1234)
        return torch.nn.Sequential(
            torch.nn.Linear(64, 64),
            torch.nn.Tanh(),
            torch.nn.Linear(64, 64),
            torch.nn.Tanh(),
            torch.nn.Linear(64, 10),
        )

    def loss_fn(model: torch.nn.Module) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(model(X), y)

    n_params = sum(p.numel() for p in model_fn().parameters())
    return Task("A_digits_mlp", model_fn, loss_fn, target, {"n": n, "params": n_params})


class TinyEncoder(torch.nn.Module):
    """Token + position embeddings, a 2-layer transformer encoder, mean pooling, linear head."""

    def __init__(self, vocab: int = 20, length: int = 16, d_model: int = 32) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Parameter(torch.randn(length, d_model) * 0.1)
        layer = torch.nn.TransformerEncoderLayer(
            d_model, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
        )
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d_model, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.tok(ids) + self.pos)
        return self.head(h.mean(dim=1))


def count_data(
    n: int = 1024, length: int = 16, vocab: int = 20, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, length), generator=g)

    def label(a: int, b: int) -> torch.Tensor:
        return ((ids == a).sum(1) > (ids == b).sum(1)).long()

    return ids, label(3, 7), label(5, 9)


def sequence_task(
    n: int = 1024, pretrain_steps: int = 200, adamw_steps: int = 100, gap: float = 0.6
) -> Task:
    """Task B: pre-train on "5 vs 9", fine-tune on "3 vs 7" (fine-tuning regime)."""
    ids, y_target, y_pre = count_data(n)
    torch.manual_seed(4321)
    base = TinyEncoder()
    opt = torch.optim.AdamW(base.parameters(), lr=3e-3)
    for _ in range(pretrain_steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(base(ids), y_pre).backward()
        opt.step()
    base.eval()
    state = {k: v.detach().clone() for k, v in base.state_dict().items()}

    def model_fn() -> torch.nn.Module:
        model = TinyEncoder()
        model.load_state_dict(state)
        return model.eval()

    def loss_fn(model: torch.nn.Module) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(model(ids), y_target)

    with torch.no_grad():
        pre_acc = float((base(ids).argmax(1) == y_pre).float().mean())
        init_loss = float(loss_fn(model_fn()))
    ft = model_fn().train()
    opt = torch.optim.AdamW(ft.parameters(), lr=3e-3)
    for _ in range(adamw_steps):
        opt.zero_grad()
        loss_fn(ft).backward()
        opt.step()
    ft.eval()
    with torch.no_grad():
        adamw_loss = float(loss_fn(ft))
    target = init_loss - gap * (init_loss - adamw_loss)
    n_params = sum(p.numel() for p in base.parameters())
    info = {
        "params": n_params,
        "n": n,
        "pretrain_steps": pretrain_steps,
        "pretrain_accuracy": pre_acc,
        "init_loss": init_loss,
        "adamw_loss": adamw_loss,
        "adamw_steps": adamw_steps,
        "gap_closed": gap,
    }
    return Task("B_seq_transformer", model_fn, loss_fn, target, info)
