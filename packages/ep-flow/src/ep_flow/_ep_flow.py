"""EP-Flow: marginal-preserving flow matching on transportation polytopes (the method)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from pymatgen.core import Element, Lattice
from torch import Tensor, nn

import methodkit
from ep_flow.data import CrystalBatch, collate_crystals
from ep_flow.model import MAX_Z, AxialGridTransformer
from ep_flow.odm import ODM
from ep_flow.polytope import DEFAULT_EPS, decode_occupancy, double_center

__all__ = ["EPFlow", "EPFlowConfig", "train_flow", "wrap"]


def wrap(u: Tensor) -> Tensor:
    """``w(u) = u - round(u)``: the shortest signed displacement on the unit torus."""
    return u - torch.round(u)


@dataclass
class EPFlowConfig:
    """Hyper-parameters of :class:`EPFlow` (defaults: the spec's small-scale model)."""

    width: int = 64
    n_layers: int = 4
    n_heads: int = 4
    n_freq: int = 4
    eps: float = DEFAULT_EPS
    lam_z: float = 1.0
    lam_f: float = 1.0
    lam_l: float = 1.0
    max_z: int = MAX_Z

    def __post_init__(self) -> None:
        if not 0.0 <= self.eps < 0.5:
            raise ValueError(f"eps must be in [0, 0.5), got {self.eps}")
        for name in ("width", "n_layers", "n_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("lam_z", "lam_f", "lam_l"):
            v = float(getattr(self, name))
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v}")


class EPFlow(nn.Module):
    """Entropic Polytope Flow: joint flow matching of occupancies, coordinates and lattice.

    Occupancies ``P in T(r, c)`` are mapped to the double-centred space
    ``Z = H_N log(P_eps) H_M / s_Z`` (``P_eps = (1 - eps) P + eps r c^T / N``). With one shared
    ``t ~ U(0, 1)``:

    - ``Z_t = (1 - t) Z_0 + t Z_1``, ``Z_0 = H_N E H_M``; velocity ``v_Z = H_N f H_M``;
    - ``F_t = (F_0 + t w(F_1 - F_0)) mod 1``, ``F_0 ~ U[0, 1)^3``, target ``w(F_1 - F_0)``;
    - ``l_t = (1 - t) l_0 + t l_1`` on the standardised ``(log a, log b, log c, angles)``;

    loss ``lam_Z |v_Z - (Z_1 - Z_0)|^2 + lam_F |v_F - w(F_1 - F_0)|^2``
    ``+ lam_L |v_L - (l_1 - l_0)|^2``
    (masked means). Sampling integrates with Euler steps; every ``Z_t`` stays in D, so it
    decodes (Sinkhorn inverse map) to an occupancy matrix with the formula's exact marginals.

    References:
        Entropic Polytope Flow (EP-Flow), formula-conditioned disordered crystal structure
        prediction (NeurIPS 2026 submission; the double-centred space, the Sinkhorn inverse and
        the network details here are *inferred* from the abstract).

    Example:
        >>> import torch
        >>> from ep_flow import EPFlow, EPFlowConfig, make_disordered_dataset, collate_crystals
        >>> model = EPFlow(EPFlowConfig(width=16, n_layers=1))
        >>> _ = model.set_normalization(collate_crystals(make_disordered_dataset(8, seed=0)))
        >>> odm = model.sample([("NaCl", 2, 1)], n_steps=2, seed=0)[0]
        >>> bool(odm.is_feasible(1e-8))
        True
    """

    exact_marginals = True  # samples meet the formula's column sums (checked by ODM)
    # registered buffers (saved with the state dict, follow .to())
    s_z: Tensor
    l_mean: Tensor
    l_std: Tensor

    def __init__(
        self, config: EPFlowConfig | None = None, network: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.config = config or EPFlowConfig()
        cfg = self.config
        self.net = network or AxialGridTransformer(
            cfg.width, cfg.n_layers, cfg.n_heads, cfg.n_freq, cfg.max_z
        )
        self.register_buffer("s_z", torch.tensor(1.0))
        self.register_buffer("l_mean", torch.zeros(6))
        self.register_buffer("l_std", torch.ones(6))

    # --- representation hooks (baselines override these) ----------------------------------
    def prepare(self, crystals: list[ODM]) -> list[ODM]:
        """Training targets from crystals (identity here; ordered baselines round them)."""
        return crystals

    def encode(self, batch: CrystalBatch) -> Tensor:
        """Unnormalised occupancy coordinates of a batch: ``H_N log(P_eps) H_M``."""
        return batch.Z

    def project(self, v: Tensor, rm: Tensor, cm: Tensor) -> Tensor:
        """Projection of a network output onto the tangent space D: ``H_N f H_M``."""
        return double_center(v, rm, cm)

    def decode(self, Z: Tensor, r: Tensor, c: Tensor, rm: Tensor, cm: Tensor) -> Tensor:
        """Occupancies from (unnormalised) coordinates: Sinkhorn, un-smooth, re-balance."""
        return decode_occupancy(Z, r, c, self.config.eps, n_iter=20000, row_mask=rm, col_mask=cm)

    # --- normalisation -------------------------------------------------------------------------
    @torch.no_grad()
    def set_normalization(self, batch: CrystalBatch) -> EPFlow:
        """Dataset scale ``s_Z`` and lattice mean / std from a (large) training batch."""
        Z = self.encode(batch)
        w = batch.row_mask[:, :, None] & batch.col_mask[:, None]
        self.s_z.fill_(float(Z[w].std().clamp_min(1e-6)))
        self.l_mean.copy_(batch.lattice.mean(0))
        self.l_std.copy_(batch.lattice.std(0).clamp_min(1e-3))
        return self

    def _check_species(self, batch: CrystalBatch) -> None:
        bad = batch.atomic_numbers[batch.atomic_numbers > self.config.max_z]
        if bad.numel():
            z = int(bad[0])
            raise KeyError(f"element {Element.from_Z(z).symbol} (Z={z}) has no embedding "
                           f"(max_z = {self.config.max_z})")  # fmt: skip

    def _velocity(
        self, Zt: Tensor, Ft: Tensor, lt: Tensor, t: Tensor, batch: CrystalBatch
    ) -> tuple[Tensor, Tensor, Tensor]:
        n = batch.row_mask.sum(1, keepdim=True).to(Zt.dtype)
        c_frac = batch.c.to(Zt.dtype) / n
        fz, vf, vl = self.net(Zt, Ft, lt, t, batch.atomic_numbers, c_frac, batch.row_mask,
                              batch.col_mask)  # fmt: skip
        rm, cm = batch.row_mask, batch.col_mask
        return self.project(fz, rm, cm), vf * rm[..., None].to(vf.dtype), vl

    def _source(
        self, batch: CrystalBatch, dtype: torch.dtype, generator: torch.Generator | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        B, N, M = batch.P.shape
        dev = batch.P.device
        rm, cm = batch.row_mask, batch.col_mask
        E = torch.randn(B, N, M, generator=generator, dtype=dtype, device=dev)
        Z0 = double_center(E, rm, cm)
        F0 = torch.rand(B, N, 3, generator=generator, dtype=dtype, device=dev)
        l0 = torch.randn(B, 6, generator=generator, dtype=dtype, device=dev)
        return Z0, F0 * rm[..., None], l0

    def loss(self, batch: CrystalBatch, generator: torch.Generator | None = None) -> Tensor:
        """Flow-matching loss of a batch (one shared ``t`` per crystal)."""
        self._check_species(batch)
        dtype = batch.P.dtype
        rm, cm = batch.row_mask, batch.col_mask
        w = (rm[:, :, None] & cm[:, None]).to(dtype)
        Z1 = self.encode(batch) / self.s_z
        F1 = batch.frac
        l1 = (batch.lattice - self.l_mean) / self.l_std
        Z0, F0, l0 = self._source(batch, dtype, generator)
        t = torch.rand(len(batch), generator=generator, dtype=dtype, device=Z1.device)
        tz = t[:, None, None]
        Zt = (1 - tz) * Z0 + tz * Z1
        uF = wrap(F1 - F0)
        Ft = torch.remainder(F0 + tz * uF, 1.0)
        lt = (1 - t[:, None]) * l0 + t[:, None] * l1
        vz, vf, vl = self._velocity(Zt, Ft, lt, t, batch)
        rmf = rm[..., None].to(dtype)
        lz = (((vz - (Z1 - Z0)) ** 2) * w).sum() / w.sum()
        lf = (((vf - uF) ** 2) * rmf).sum() / (3 * rmf.sum())
        ll = ((vl - (l1 - l0)) ** 2).mean()
        cfg = self.config
        return cfg.lam_z * lz + cfg.lam_f * lf + cfg.lam_l * ll

    @torch.no_grad()
    def integrate(
        self,
        batch: CrystalBatch,
        n_steps: int = 50,
        generator: torch.Generator | None = None,
        path: bool = False,
    ) -> tuple:
        """Euler integration ``t: 0 -> 1``; returns ``(Z_1 * s_Z, F_1, l_1)`` (+ the Z path)."""
        if int(n_steps) < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        self._check_species(batch)
        dtype = batch.P.dtype
        Z, F, lat = self._source(batch, dtype, generator)
        dt = 1.0 / int(n_steps)
        traj = [Z]
        for k in range(int(n_steps)):
            t = torch.full((len(batch),), k * dt, dtype=dtype, device=Z.device)
            vz, vf, vl = self._velocity(Z, F, lat, t, batch)
            Z = Z + dt * vz
            F = torch.remainder(F + dt * vf, 1.0)
            lat = lat + dt * vl
            traj.append(Z)
        out = (Z * self.s_z, F, lat * self.l_std + self.l_mean)
        return (*out, traj) if path else out

    def sample(
        self,
        conditions: list[tuple] | CrystalBatch,
        n_steps: int = 50,
        n_samples: int = 1,
        seed: int = 0,
    ) -> list[ODM]:
        """Generate crystals for formulas ``(formula, n_sites, n_formula_units)``.

        Args:
            conditions: list of conditions, or a ``CrystalBatch`` (geometry ignored).
            n_steps: Euler steps (>= 1).
            n_samples: samples per condition (>= 1).
            seed: seed of the sampling generator.

        Returns:
            ``len(conditions) * n_samples`` ODMs, condition-major (all samples of the first
            condition first); ``.to_structure()`` gives pymatgen Structures.
        """
        if int(n_steps) < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        if int(n_samples) < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        if isinstance(conditions, CrystalBatch):
            b64 = conditions
        else:
            b64 = collate_crystals(conditions, self.config.eps, dtype=torch.float64)
        dev = self.s_z.device
        idx = torch.arange(len(b64)).repeat_interleave(int(n_samples))
        b64 = b64.index(idx).to(device=dev, dtype=torch.float64)  # exact marginals for decoding
        batch = b64.to(dtype=self.s_z.dtype)
        gen = torch.Generator(device=dev).manual_seed(int(seed))
        was = self.training
        self.eval()
        Z, F, lat = self.integrate(batch, n_steps, gen)
        self.train(was)
        P = self.decode(Z.double(), b64.r, b64.c, b64.row_mask, b64.col_mask)
        return [self._odm(P[i], F[i], lat[i], b64, i) for i in range(len(batch))]

    def _odm(self, P: Tensor, F: Tensor, lat: Tensor, batch: CrystalBatch, i: int) -> ODM:
        n = int(batch.row_mask[i].sum())
        m = int(batch.col_mask[i].sum())
        zs = batch.atomic_numbers[i, :m].tolist()
        species = [None if z == 0 else Element.from_Z(int(z)) for z in zs]
        lv = lat.double().cpu().numpy()
        abc = np.exp(np.clip(lv[:3], -3.0, 5.0))
        angles = np.clip(lv[3:], 30.0, 150.0)
        if angles.sum() >= 359.0 or any(2 * a >= angles.sum() for a in angles):
            angles = np.full(3, 90.0)  # not a valid cell: fall back to right angles
        P_np = P[:n, :m].detach().cpu().numpy()
        lattice = Lattice.from_parameters(*abc, *angles)
        frac = F[:n].double().cpu().numpy() % 1.0
        c = batch.c[i, :m].cpu().numpy()
        return ODM(P_np, species, frac, lattice, c=c, check_columns=self.exact_marginals)

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in asdict(self.config).items())


def train_flow(
    model: EPFlow,
    crystals: list[ODM],
    steps: int = 6000,
    batch_size: int = 64,
    lr: float = 3e-4,
    seed: int = 0,
    device: str | torch.device = "cpu",
    schedule: str = "constant",
    progress: bool | None = None,
    callback: Callable[[int, EPFlow], None] | None = None,
    callback_every: int = 0,
    schedule_steps: int | None = None,
) -> list[float]:
    """Train ``model`` with AdamW on ``crystals`` (random mini-batches); returns the losses.

    Sets the model's normalisation (``s_Z``, lattice statistics) from the training set first.
    ``schedule``: ``"constant"`` learning rate, or ``"cosine"`` (linear warm-up over the first
    5 % of the steps, then cosine decay to 0), which lets short budgets use a larger ``lr``.

    Args:
        model: the flow (or a baseline) to train in place.
        crystals: training ODMs.
        steps: optimiser steps (>= 1).
        batch_size: crystals per step (>= 1; capped at the training-set size).
        lr: AdamW learning rate (> 0).
        seed: seed of the batch and noise generators.
        device: where to train.
        schedule: ``"constant"`` or ``"cosine"``.
        progress: a progress bar over the steps (``None``: on a terminal only; ``True``
            always; ``False`` never; ``TQDM_DISABLE=1`` silences it).
        callback: called as ``callback(step, model)`` after every ``callback_every`` steps
            (and after the last one), e.g. to evaluate a learning curve; the model is put back
            in training mode afterwards.
        callback_every: steps between callbacks (>= 1 when ``callback`` is given).
        schedule_steps: length of the learning-rate schedule (default ``steps``); a larger
            value trains only the first ``steps`` steps of that longer schedule, so its
            checkpoints see the same learning rates as a longer run's (>= ``steps``).

    Returns:
        The training loss of every step.
    """
    _check_train_args(crystals, steps, batch_size, lr, schedule, callback, callback_every)
    horizon = int(steps) if schedule_steps is None else int(schedule_steps)
    if horizon < int(steps):
        raise ValueError(f"schedule_steps must be >= steps ({steps}), got {schedule_steps}")
    full = collate_crystals(model.prepare(crystals), model.config.eps).to(device=device)
    model.to(device)
    model.set_normalization(full)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: _lr_factor(k, horizon, schedule))
    gen = torch.Generator().manual_seed(int(seed))
    dgen = torch.Generator(device=device).manual_seed(int(seed) + 1)
    sizes = (full.row_mask.sum(1).cpu(), full.col_mask.sum(1).cpu())  # trim without device syncs
    losses = torch.zeros(int(steps), device=full.P.device)
    model.train()
    desc = f"train {type(model).__name__}"
    for k in methodkit.progress(range(int(steps)), enabled=progress, desc=desc, total=int(steps)):
        idx = torch.randint(len(full), (min(batch_size, len(full)),), generator=gen)
        batch = trim_batch(full.index(idx.to(full.P.device)), int(sizes[0][idx].max()),
                           int(sizes[1][idx].max()))  # fmt: skip
        loss = model.loss(batch, dgen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses[k] = loss.detach()  # stays on the device: one transfer at the end
        if callback is not None and ((k + 1) % callback_every == 0 or k + 1 == int(steps)):
            callback(k + 1, model)
            model.train()
    return losses.cpu().tolist()


def _check_train_args(
    crystals: list[ODM],
    steps: int,
    batch_size: int,
    lr: float,
    schedule: str,
    callback: Callable | None,
    callback_every: int,
) -> None:
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not (math.isfinite(float(lr)) and float(lr) > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr}")
    if len(crystals) < 1:
        raise ValueError("train_flow needs at least one crystal")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if callback is not None and int(callback_every) < 1:
        raise ValueError(f"callback_every must be >= 1 with a callback, got {callback_every}")


SCHEDULES = ("constant", "cosine")


def _lr_factor(step: int, steps: int, schedule: str) -> float:
    """Multiplier of the base learning rate at ``step`` (see :func:`train_flow`)."""
    if schedule == "constant":
        return 1.0
    warmup = max(1, steps // 20)
    return min(1.0, (step + 1) / warmup) * 0.5 * (1.0 + math.cos(math.pi * step / steps))


def trim_batch(batch: CrystalBatch, n: int, m: int) -> CrystalBatch:
    """The first ``n`` rows / ``m`` columns of a padded batch (drops all-padding ones)."""
    fields = {}
    for k, v in batch.__dict__.items():
        if k in ("P", "Z"):
            v = v[:, :n, :m]
        elif k in ("row_mask", "r", "frac"):
            v = v[:, :n]
        elif k in ("col_mask", "c", "atomic_numbers"):
            v = v[:, :m]
        fields[k] = v
    return CrystalBatch(**fields)
