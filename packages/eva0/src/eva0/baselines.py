"""Baselines: NoAdapt, Tent (BP), DeYO (BP), FOA (CMA-ES on prompts) and naive zeroth-order.

Every baseline is an ``nn.Module`` with ``forward(x) -> (B, C)`` log-probabilities or logits
(argmax = prediction), ``reset()`` and a ``forward_passes`` counter of model calls.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from eva0._cmaes import CMAES
from eva0._eva0 import EVA0, select_params
from eva0.losses import entropy
from eva0.models import PromptedViT
from eva0.outputs import as_logits
from methodkit.torch import generator

__all__ = ["FOA", "DeYO", "NoAdapt", "Tent", "ZOShared"]


class NoAdapt(nn.Module):
    """The source model as is: one forward pass, log-softmax output.

    Args:
        model: Classifier mapping (B, ...) to (B, C) logits.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.forward_passes = 0

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Log-softmax of the model's logits."""
        self.forward_passes += 1
        return torch.log_softmax(as_logits(self.model(x)), dim=1)

    def reset(self) -> None:
        """Nothing to reset (the counter restarts)."""
        self.forward_passes = 0


class _BPNorm(nn.Module):
    """Shared machinery of the backprop baselines: SGD with momentum on the norm affines."""

    def __init__(self, model: nn.Module, lr: float, momentum: float) -> None:
        super().__init__()
        if not lr >= 0:
            raise ValueError(f"lr must be >= 0, got {lr}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.model = model
        self.lr, self.momentum = float(lr), float(momentum)
        self.params = [p for _, p in select_params(model, "norm")]
        self.source = [p.detach().clone() for p in self.params]
        self.buffers_: list[torch.Tensor] = [torch.zeros_like(p) for p in self.params]
        self.forward_passes = 0

    def _step(self, loss: torch.Tensor) -> None:
        grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        with torch.no_grad():  # torch.optim.SGD's rule (dampening 0), written out
            for p, g, buf in zip(self.params, grads, self.buffers_, strict=True):
                if g is None:
                    continue
                buf.mul_(self.momentum).add_(g)
                p.sub_(buf, alpha=self.lr)

    def reset(self) -> None:
        """Restore the source affines and clear the momentum."""
        with torch.no_grad():
            for p, s, b in zip(self.params, self.source, self.buffers_, strict=True):
                p.copy_(s)
                b.zero_()
        self.forward_passes = 0


class Tent(_BPNorm):
    """Tent: minimise the prediction entropy by SGD on the norm affines (one BP per batch).

    Args:
        model: Classifier.
        lr: SGD step size.
        momentum: SGD momentum.

    References:
        Wang et al., "Tent: Fully Test-Time Adaptation by Entropy Minimization", ICLR 2021.
    """

    def __init__(self, model: nn.Module, lr: float = 1e-3, momentum: float = 0.9) -> None:
        super().__init__(model, lr, momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predict with the current affines, then take one entropy step."""
        with torch.enable_grad():
            logits = as_logits(self.model(x))
            self.forward_passes += 1
            self._step(entropy(logits).mean())
        return logits.detach()


def patch_shuffle(x: torch.Tensor, patch_len: int, generator: torch.Generator) -> torch.Tensor:
    """Cut each image into ``patch_len x patch_len`` patches and permute them (one permutation).

    Raises:
        ValueError: If ``patch_len`` does not divide the image height and width.
    """
    B, C, H, W = x.shape
    if H % patch_len or W % patch_len:
        raise ValueError(f"patch_len {patch_len} must divide the image size {H}x{W}")
    ph, pw = H // patch_len, W // patch_len
    p = x.reshape(B, C, patch_len, ph, patch_len, pw).permute(0, 1, 2, 4, 3, 5)
    p = p.reshape(B, C, patch_len * patch_len, ph, pw)
    perm = torch.randperm(patch_len * patch_len, generator=generator)
    p = p[:, :, perm].reshape(B, C, patch_len, patch_len, ph, pw).permute(0, 1, 2, 4, 3, 5)
    return p.reshape(B, C, H, W)


class DeYO(_BPNorm):
    """DeYO: entropy minimisation on samples whose prediction depends on object shape.

    Samples are kept when ``H(p_i) < ent_margin`` and the pseudo-label probability difference
    ``PLPD_i = p(y_i|x_i) - p(y_i|shuffle(x_i)) > plpd_threshold``; the kept entropies are
    weighted by ``exp(-(H - ent_margin)) + exp(PLPD)``. One extra forward on patch-shuffled
    images per batch.

    Args:
        model: Classifier taking (B, C, H, W) images.
        lr: SGD step size.
        momentum: SGD momentum.
        ent_margin: Entropy filter (default ``0.5 ln C``).
        plpd_threshold: PLPD filter.
        patch_len: Patches per side for the shuffle.
        seed: Seed of the shuffles.

    References:
        Lee et al., "Entropy is not Enough for Test-Time Adaptation: From the Perspective of
        Disentangled Factors", ICLR 2024.
    """

    def __init__(
        self,
        model: nn.Module,
        lr: float = 1e-3,
        momentum: float = 0.9,
        ent_margin: float | None = None,
        plpd_threshold: float = 0.2,
        patch_len: int = 4,
        seed: int = 0,
    ) -> None:
        super().__init__(model, lr, momentum)
        self.ent_margin, self.plpd_threshold = ent_margin, float(plpd_threshold)
        self.patch_len, self.seed = int(patch_len), int(seed)
        self.generator = generator(self.seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predict, filter and weight samples, take one step; returns the logits."""
        if x.dim() != 4:
            raise ValueError(f"DeYO needs (B, C, H, W) images, got shape {tuple(x.shape)}")
        with torch.enable_grad():
            logits = as_logits(self.model(x))
            self.forward_passes += 1
            margin = (
                self.ent_margin if self.ent_margin is not None else 0.5 * math.log(logits.shape[1])
            )
            ent = entropy(logits)
            keep = ent < margin
            if keep.any():
                with torch.no_grad():
                    xs = patch_shuffle(x[keep], self.patch_len, self.generator)
                    self.forward_passes += 1
                    prob = logits[keep].softmax(1).detach()
                    yhat = prob.argmax(1, keepdim=True)
                    prob_s = as_logits(self.model(xs)).softmax(1)
                    plpd = (prob.gather(1, yhat) - prob_s.gather(1, yhat)).squeeze(1)
                sel = plpd > self.plpd_threshold
                if sel.any():
                    e = ent[keep][sel]
                    coeff = torch.exp(-(e.detach() - margin)) + torch.exp(plpd[sel])
                    self._step((e * coeff).mean())
        return logits.detach()

    def reset(self) -> None:
        """Restore the source affines, momentum and shuffle stream."""
        super().reset()
        self.generator = generator(self.seed)


class FOA(nn.Module):
    r"""FOA: forward-only adaptation by CMA-ES over prompt tokens, plus activation shifting.

    Per batch: ``popsize`` candidate prompt sets are evaluated (one forward each) with fitness

    .. math::  F = \sum_i H(p_i) + \lambda \tfrac{B}{64} \sum_{l} \big(\lVert\sigma_l -
        \sigma^{src}_l\rVert^2 + \lVert\mu_l - \mu^{src}_l\rVert^2\big)

    on the class-token features after each block ``l``; CMA-ES is updated and the batch is
    predicted with the new mean (the incumbent, one more forward), its final class feature
    shifted by ``mu_src - EMA_0.9(mu_test)``: ``popsize + 1`` forwards per batch.

    Args:
        model: A timm ``VisionTransformer`` or :class:`eva0.models.TinyViT`.
        source_stats: Clean source images (a tensor, statistics are computed once) or a dict
            ``{"mean": [...], "std": [...], "final_mean": tensor}`` from :meth:`statistics`.
        n_prompts: Number of prompt tokens.
        popsize: CMA-ES population (default ``4 + floor(3 ln d)``, d = n_prompts * D).
        fitness_lambda: Weight of the statistics term.
        shift: Apply activation shifting.
        sigma0: Initial CMA-ES step size.
        backend: ``"builtin"`` (this package's CMA-ES) or ``"cma"`` (the ``cma`` package).
        seed: Seed of the prompt init and CMA-ES sampling.

    Raises:
        TypeError: If ``model`` is not a VisionTransformer-like model.
        ImportError: With ``backend="cma"`` when ``cma`` is missing
            (``pip install eva0[baselines]``).

    References:
        Niu et al., "Test-Time Model Adaptation with Only Forward Passes", ICML 2024.
    """

    def __init__(
        self,
        model: nn.Module,
        source_stats: torch.Tensor | dict[str, Any],
        n_prompts: int = 3,
        popsize: int | None = None,
        fitness_lambda: float = 0.4,
        shift: bool = True,
        sigma0: float = 1.0,
        backend: str = "builtin",
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.prompted = PromptedViT(model, n_prompts)
        if backend not in ("builtin", "cma"):
            raise ValueError(f"backend must be 'builtin' or 'cma', got {backend!r}")
        if backend == "cma":
            try:
                import cma  # noqa: F401
            except ImportError as exc:
                raise ImportError(
                    "FOA(backend='cma') needs the cma package: pip install 'eva0[baselines]'"
                ) from exc
        self.backend = backend
        self.n_prompts, self.fitness_lambda, self.shift = n_prompts, float(fitness_lambda), shift
        self.sigma0, self.seed = float(sigma0), int(seed)
        D = self.prompted.embed_dim
        self.dim = n_prompts * D
        self.popsize = popsize or 4 + int(3 * math.log(self.dim))
        if isinstance(source_stats, torch.Tensor):
            source_stats = self.statistics(source_stats)
        self.src = source_stats
        self.forward_passes = 0
        self.reset()

    @torch.no_grad()
    def statistics(self, images: torch.Tensor, batch_size: int = 64) -> dict[str, Any]:
        """Per-block class-token mean/std and final class-feature mean on clean images."""
        feats: list[list[torch.Tensor]] = []
        for i in range(0, images.shape[0], batch_size):
            _, f = self._features(images[i : i + batch_size], None)
            feats.append(f)
        cat = [torch.cat(col) for col in zip(*feats, strict=True)]
        return {
            "mean": [c.mean(0) for c in cat[:-1]],
            "std": [c.std(0) for c in cat[:-1]],
            "final_mean": cat[-1].mean(0),
        }

    def _features(
        self, x: torch.Tensor, prompts: torch.Tensor | None, shift: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        vit = self.prompted.vit
        cap: dict[str, torch.Tensor] = {}
        head = vit.get_submodule("head")
        handle = head.register_forward_pre_hook(lambda m, a: cap.__setitem__("h", a[0]))
        try:
            logits, feats = self.prompted(x, prompts, shift)
        finally:
            handle.remove()
        final = cap["h"] - (shift if shift is not None else 0)
        return logits, [*feats, final]

    def reset(self) -> None:
        """Restart CMA-ES from the initial prompts and clear the shift statistics."""
        gen = generator(self.seed)
        D = self.prompted.embed_dim
        proj = self.prompted.vit.get_parameter("patch_embed.proj.weight")
        val = math.sqrt(6.0 / (3 * proj[0].numel() + D))
        x0 = (torch.rand(self.dim, generator=gen, dtype=torch.float64) * 2 - 1) * val
        if self.backend == "cma":
            import cma

            self.es: Any = cma.CMAEvolutionStrategy(
                x0.numpy(),
                self.sigma0,
                {"popsize": self.popsize, "seed": self.seed + 1, "verbose": -9},
            )
        else:
            self.es = CMAES(x0.numpy(), self.sigma0, self.popsize, np.random.default_rng(self.seed))
        self.ema: torch.Tensor | None = None
        self.forward_passes = 0

    def _mean(self) -> np.ndarray:
        return np.asarray(self.es.mean)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One CMA-ES generation on the batch, then predict with the incumbent prompts."""
        B = x.shape[0]
        cands = np.asarray(self.es.ask())
        fit = []
        for c in cands:
            prompts = torch.as_tensor(c, dtype=x.dtype).reshape(self.n_prompts, -1)
            logits, feats = self._features(x, prompts)
            self.forward_passes += 1
            disc = 0.0
            for f, mu, sd in zip(feats[:-1], self.src["mean"], self.src["std"], strict=True):
                disc += float((f.std(0) - sd).pow(2).sum() + (f.mean(0) - mu).pow(2).sum())
            score = float(entropy(logits).sum()) + self.fitness_lambda * disc * B / 64
            fit.append(score if math.isfinite(score) else 1e30)
        if self.backend == "cma":
            self.es.tell(list(cands), fit)
        else:
            self.es.tell(np.asarray(fit))
        prompts = torch.as_tensor(self._mean(), dtype=x.dtype).reshape(self.n_prompts, -1)
        shift = None
        if self.shift and self.ema is not None:
            shift = self.src["final_mean"] - self.ema
        logits, feats = self._features(x, prompts, shift)
        self.forward_passes += 1
        m = feats[-1].mean(0)
        self.ema = m if self.ema is None else 0.9 * self.ema + 0.1 * m
        return logits


class ZOShared(EVA0):
    """Naive zeroth-order TTA: EVA-0 with one shared direction, plain entropy and no anchor.

    Args:
        model: Classifier.
        **kwargs: Forwarded to :class:`eva0.EVA0` (``per_sample``, ``loss`` and
            ``anchor_weight`` are fixed).
    """

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        kwargs.update(per_sample=False, loss="entropy", anchor_weight=0.0)
        super().__init__(model, **kwargs)
