"""The neural PLVM: per-task encoders, fusion into one posterior, decoders and a target head.

Generative model (inferred from the abstract; see the README):

    z ~ N(0, I_D);  x_t ~ p_theta_t(x | z) per observed task;  y ~ Bernoulli(sigmoid(w^T z + b))

with the "switch policy" decoder ``P(switch_e = 1 | z, progress_{e-1}, t) = sigmoid(g_t(z,
progress_{e-1}))``. Inference: ``E_t(x_t) -> (mu_t, logvar_t)``, fused by a product of experts
with the prior (``fusion="poe"``), a uniform mixture (``"moe"``), or no shared latent at all
(``"concat"``: concatenated encoder states -> classifier, the no-fusion baseline).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NotRequired, TypedDict

import torch
from torch import Tensor, nn
from torch.nn import functional as F  # noqa: N812

from plvm._validation import DECODERS, ENCODERS, FUSIONS, check_choice, check_latent_dim
from plvm.encoders import DeepSetsEncoder, GRUEncoder
from plvm.fusion import moe_moments, moe_sample, poe

__all__ = ["PLVM", "Batch"]


class Batch(TypedDict):
    """``{"X": {task: (N, L, F)}, "mask": {task: (N, L) bool}, "y": (N,) float with NaN}``.

    ``y`` is read by :meth:`PLVM.elbo` only; prediction needs ``X`` and ``mask``.
    """

    X: dict[str, Tensor]
    mask: dict[str, Tensor]
    y: NotRequired[Tensor]


SWITCH, PROGRESS, GAIN, LOG_DT = 0, 2, 3, 5  # columns of plvm.traces.FEATURES


def _kl_std_normal(mu: Tensor, logvar: Tensor) -> Tensor:
    """KL(N(mu, diag e^logvar) || N(0, I)) per row."""
    return 0.5 * (logvar.exp() + mu**2 - 1.0 - logvar).sum(-1)


Encoder = DeepSetsEncoder | GRUEncoder


class PLVM(nn.Module):
    r"""Process-level latent variable model over a shared person-level latent ``z``.

    Objective per person (semi-supervised; the label term only where ``y`` is known):

    .. math:: \mathcal L = E_{q(z|x_S)}\Big[\sum_{t} \log p(x_t|z)\Big]
        - \beta\,KL(q(z|x_S)\,\|\,N(0,I)) + \lambda_y \log p(y|z)
        + \sum_t \Big(E_{q(z|x_t)}[\log p(x_t|z)] - \beta\,KL(q(z|x_t)\|N(0,I))
        + \lambda_y \log p(y|z)\Big)

    (MVAE-style subsampling keeps every single-task expert calibrated; ``beta`` is the KL
    warm-up weight). Prediction uses the probit approximation
    :math:`p(y=1) \approx \sigma\big((w^T\mu + b)/\sqrt{1 + \pi/8\, w^T\Lambda^{-1}w}\big)`.

    Args:
        tasks: Source task names (one encoder and one decoder each).
        n_features: Event features ``F``.
        latent_dim: ``D >= 1``.
        encoder: ``"deepsets"`` (CPU default) or ``"gru"``.
        fusion: ``"poe"``, ``"moe"`` or ``"concat"``.
        decoder: ``"switch_policy"`` or ``"switch_policy+gaussian"`` (adds Gaussian terms for
            log dt and progress gain).
        hidden: Width of every MLP.
        lambda_y: Weight of the label term.

    References:
        Kasumba, Barbour & Ho, "Early Prediction of Future Behavioral Strategy from Process
        Traces", arXiv 2605.30550 (2026).

    Example:
        >>> m = PLVM(["A", "B"], n_features=7)
        >>> X = torch.rand(4, 5, 7)
        >>> batch = {"X": {"A": X, "B": X}, "mask": {"A": torch.ones(4, 5, dtype=torch.bool),
        ...          "B": torch.ones(4, 5, dtype=torch.bool)}, "y": torch.tensor([0., 1, 0, 1])}
        >>> m.predict_proba(batch).shape
        torch.Size([4])
    """

    feat_loc: Tensor  # buffers (registered in __init__)
    feat_scale: Tensor

    def __init__(
        self,
        tasks: Sequence[str],
        n_features: int = 7,
        latent_dim: int = 2,
        encoder: str = "deepsets",
        fusion: str = "poe",
        decoder: str = "switch_policy",
        hidden: int = 32,
        lambda_y: float = 10.0,
    ) -> None:
        super().__init__()
        self.tasks = list(tasks)
        if not self.tasks:
            raise ValueError("tasks must name at least one source task")
        self.latent_dim = D = check_latent_dim(latent_dim)
        self.encoder_name = check_choice(encoder, ENCODERS, "encoder")
        self.fusion = check_choice(fusion, FUSIONS, "fusion")
        self.decoder_name = check_choice(decoder, DECODERS, "decoder")
        self.lambda_y = float(lambda_y)
        enc = DeepSetsEncoder if encoder == "deepsets" else GRUEncoder
        encoders: dict[str, Encoder] = {t: enc(n_features, D, hidden) for t in self.tasks}
        self.encoders = nn.ModuleDict(encoders)
        self.register_buffer("feat_loc", torch.zeros(n_features))
        self.register_buffer("feat_scale", torch.ones(n_features))
        if fusion == "concat":
            width = sum(e.embed_dim for e in encoders.values()) + len(self.tasks)
            self.classifier = nn.Sequential(
                nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, 1)
            )
            return
        self.decoders = nn.ModuleDict(
            {
                t: nn.Sequential(nn.Linear(D + 1, hidden), nn.Tanh(), nn.Linear(hidden, 1))
                for t in self.tasks
            }
        )
        if decoder == "switch_policy+gaussian":
            self.gauss = nn.ModuleDict({t: nn.Linear(D, 2) for t in self.tasks})
            self.gauss_logstd = nn.ParameterDict(
                {t: nn.Parameter(torch.zeros(2)) for t in self.tasks}
            )
        self.head = nn.Linear(D, 1)  # w, b

    # ------------------------------------------------------------------ inference
    def _tasks(self, tasks: Sequence[str] | None) -> list[str]:
        tasks = self.tasks if tasks is None else list(tasks)
        unknown = [t for t in tasks if t not in self.tasks]
        if unknown:
            raise ValueError(f"unknown task(s) {unknown}; the model has {self.tasks}")
        return tasks

    def _encoder(self, task: str) -> Encoder:
        enc = self.encoders[task]
        assert isinstance(enc, DeepSetsEncoder | GRUEncoder)  # built so in __init__
        return enc

    def _scaled(self, X: Tensor) -> Tensor:
        return (X - self.feat_loc) / self.feat_scale

    def experts(
        self, batch: Batch, tasks: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per-task experts ``mu, logvar (T, N, D)`` and ``present (T, N)``."""
        tasks = self._tasks(tasks)
        X, M = batch["X"], batch["mask"]
        out = [self.encoders[t](self._scaled(X[t]), M[t]) for t in tasks]
        present = torch.stack([M[t].any(1) for t in tasks])
        return torch.stack([o[0] for o in out]), torch.stack([o[1] for o in out]), present

    def posterior(self, batch: Batch, tasks: Sequence[str] | None = None) -> tuple[Tensor, Tensor]:
        """Fused posterior ``(mu, var)``, each ``(N, D)`` (diagonal covariance).

        ``poe``: the product of the present experts and the prior; ``moe``: the moments of
        the uniform mixture. A person with no present task gets the prior ``N(0, I)``.
        """
        if self.fusion == "concat":
            raise ValueError("fusion='concat' has no shared latent, so no posterior")
        mu_t, lv_t, present = self.experts(batch, tasks)
        if self.fusion == "poe":
            mu, lv = poe(mu_t, lv_t, present)
            return mu, lv.exp()
        return moe_moments(mu_t, lv_t, present)

    def predict_logit(self, batch: Batch, tasks: Sequence[str] | None = None) -> Tensor:
        """Logit of ``p(y = 1 | x)`` (probit approximation over the posterior)."""
        if self.fusion == "concat":
            return self._concat_logit(batch, tasks)
        mu, var = self.posterior(batch, tasks)
        w = self.head.weight[0]
        s2 = (var * w**2).sum(-1)  # w^T Lambda^{-1} w (diagonal Lambda)
        return self.head(mu)[:, 0] / torch.sqrt(1.0 + math.pi / 8.0 * s2)

    def predict_proba(self, batch: Batch, tasks: Sequence[str] | None = None) -> Tensor:
        """``p(y = 1 | x)`` per person, ``(N,)``."""
        return torch.sigmoid(self.predict_logit(batch, tasks))

    def _concat_logit(self, batch: Batch, tasks: Sequence[str] | None) -> Tensor:
        use = set(self._tasks(tasks))
        X, M = batch["X"], batch["mask"]
        parts, flags = [], []
        for t in self.tasks:  # fixed layout; a task left out is all zeros, flag 0
            m = M[t] if t in use else torch.zeros_like(M[t])
            e = self._encoder(t).embed(self._scaled(X[t]), m)
            on = m.any(1, keepdim=True).to(e.dtype)
            parts.append(e * on)
            flags.append(on)
        return self.classifier(torch.cat(parts + flags, -1))[:, 0]

    # ------------------------------------------------------------------ likelihood
    def log_likelihood(self, task: str, z: Tensor, X: Tensor, mask: Tensor) -> Tensor:
        """``log p(x_t | z)`` per person ``(N,)``: the switch policy over events 2..L."""
        sw = X[:, 1:, SWITCH]
        prev = X[:, :-1, PROGRESS]  # progress of the current zone when the choice is made
        m = (mask[:, 1:] & mask[:, :-1]).to(z.dtype)
        L1 = sw.shape[1]
        inp = torch.cat([z.unsqueeze(1).expand(-1, L1, -1), prev.unsqueeze(-1)], -1)
        logit = self.decoders[task](inp)[..., 0]
        ll = -(F.binary_cross_entropy_with_logits(logit, sw, reduction="none") * m).sum(1)
        if self.decoder_name == "switch_policy+gaussian":
            loc = self.gauss[task](z)  # (N, 2): mean log dt, mean gain
            ls = self.gauss_logstd[task]
            mm = mask.to(z.dtype)
            for k, col in enumerate((LOG_DT, GAIN)):
                r = (X[..., col] - loc[:, k : k + 1]) / ls[k].exp()
                lp = -0.5 * r**2 - ls[k] - 0.5 * math.log(2 * math.pi)
                ll = ll + (lp * mm).sum(1)
        return ll

    def _label_ll(self, z: Tensor, y: Tensor) -> Tensor:
        known = ~torch.isnan(y)
        logit = self.head(z)[:, 0]
        yy = torch.where(known, y, torch.zeros_like(y))
        bce = F.binary_cross_entropy_with_logits(logit, yy, reduction="none")
        return -bce * known.to(z.dtype)

    def elbo(
        self,
        batch: Batch,
        generator: torch.Generator | None = None,
        kl_weight: float = 1.0,
    ) -> Tensor:
        """Mean per-person objective (to maximise), one reparameterised sample per term.

        Raises:
            ValueError: If ``batch`` has no labels ``"y"`` (use NaN for an unknown label).
        """
        if "y" not in batch:
            raise ValueError("batch needs labels 'y' (NaN where unknown) for the ELBO")
        y = batch["y"]
        if self.fusion == "concat":
            known = ~torch.isnan(y)
            yy = torch.where(known, y, torch.zeros_like(y))
            bce = F.binary_cross_entropy_with_logits(
                self._concat_logit(batch, None), yy, reduction="none"
            )
            return -(bce * known.to(bce.dtype)).mean()
        X, M = batch["X"], batch["mask"]
        mu_t, lv_t, present = self.experts(batch)
        N, D = mu_t.shape[1:]

        def noise() -> Tensor:
            return torch.randn((N, D), generator=generator, dtype=mu_t.dtype, device=mu_t.device)

        def rec(z: Tensor, tasks: Sequence[int]) -> Tensor:
            tot = torch.zeros(N, dtype=z.dtype, device=z.device)
            for k in tasks:
                t = self.tasks[k]
                tot = tot + self.log_likelihood(t, z, X[t], M[t]) * present[k]
            return tot

        all_k = range(len(self.tasks))
        if self.fusion == "poe":
            mu, lv = poe(mu_t, lv_t, present)
            z = mu + torch.exp(0.5 * lv) * noise()
            kl = _kl_std_normal(mu, lv)
        else:  # moe: sample one present component; KL bounded by the mean component KL
            z = moe_sample(mu_t, lv_t, present, generator)
            pm = present.to(mu_t.dtype)
            kl = (_kl_std_normal(mu_t, lv_t) * pm).sum(0) / pm.sum(0).clamp(min=1)
        total = rec(z, all_k) - kl_weight * kl + self.lambda_y * self._label_ll(z, y)
        for k in all_k:  # single-task terms: q(z | x_t) = expert t x prior
            mu1, lv1 = poe(mu_t[k : k + 1], lv_t[k : k + 1])
            z1 = mu1 + torch.exp(0.5 * lv1) * noise()
            term = rec(z1, [k]) - kl_weight * _kl_std_normal(mu1, lv1)
            term = term + self.lambda_y * self._label_ll(z1, y)
            total = total + term * present[k]
        return total.mean()
