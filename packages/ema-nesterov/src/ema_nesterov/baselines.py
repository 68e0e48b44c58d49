"""Reference lookaheads the paper compares against: one-step Nesterov and k-step Lookahead."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ema_nesterov._ema_nesterov import EMANesterov
from ema_nesterov._wrapping import as_base_list, check_sparse, merged_defaults


class NesterovLookahead(EMANesterov):
    r"""One-step Nesterov lookahead around any base optimizer: :class:`EMANesterov` with gamma 0.

    .. math::

        y_t = \theta_t + \beta_t (\theta_t - \theta_{t-1}), \qquad
        \theta_{t+1} = \mathcal{A}_t(y_t)

    With ``torch.optim.SGD`` (no momentum) as the base this is exactly Nesterov's
    accelerated gradient; it is the short-horizon lookahead the paper argues against.

    Args:
        base_optimizer: A ``torch.optim.Optimizer`` or a sequence of them.
        beta: Lookahead size ``>= 0``.
        beta_schedule: ``step -> multiplier`` (see :class:`EMANesterov`).
        memory_efficient: ``None`` (default) folds ``y`` into ``m`` for float32/float64
            parameters, as :class:`EMANesterov` does; ``True``/``False`` force one/two buffers.
        state_dtype: dtype of the buffers.

    References:
        Nesterov. *A method for solving the convex programming problem with convergence
        rate O(1/k^2)*. Soviet Math. Dokl., 1983.

    Example:
        >>> import torch
        >>> from ema_nesterov import NesterovLookahead
        >>> w = torch.nn.Parameter(torch.ones(3))
        >>> opt = NesterovLookahead(torch.optim.SGD([w], lr=0.1), beta=0.9)
    """

    def __init__(
        self,
        base_optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
        beta: float = 0.9,
        beta_schedule: Callable[[int], float] | None = None,
        memory_efficient: bool | None = None,
        state_dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            base_optimizer,
            gamma=0.0,
            beta=beta,
            beta_schedule=beta_schedule,
            memory_efficient=memory_efficient,
            state_dtype=state_dtype,
        )


class Lookahead(torch.optim.Optimizer):
    r"""Lookahead (Zhang et al. 2019): ``k`` fast base steps, then a slow-weight update.

    After every ``k``-th base step the slow weights :math:`\phi` move a fraction
    :math:`\alpha` towards the fast weights :math:`\theta` and the fast weights restart there:

    .. math::

        \phi \leftarrow \phi + \alpha (\theta - \phi), \qquad \theta \leftarrow \phi

    Same wrapper conventions as :class:`EMANesterov`: ``param_groups`` are the base groups,
    buffers live in the wrapper's state, ``eval()`` puts the slow weights in the model and
    ``train()`` restores the fast ones.

    Args:
        base_optimizer: A ``torch.optim.Optimizer`` or a sequence of them.
        k: Number of fast steps per slow update (>= 1).
        alpha: Slow step size in ``(0, 1]``.

    Raises:
        TypeError: If ``base_optimizer`` is not an optimizer or is already a ``Lookahead``.
        ValueError: If ``k < 1`` or ``alpha`` is outside ``(0, 1]``.

    References:
        Zhang, Lucas, Hinton, Ba. *Lookahead Optimizer: k steps forward, 1 step back*.
        NeurIPS 2019.

    Example:
        >>> import torch
        >>> from ema_nesterov import Lookahead
        >>> w = torch.nn.Parameter(torch.ones(3))
        >>> opt = Lookahead(torch.optim.AdamW([w], lr=1e-2), k=5, alpha=0.5)
    """

    def __init__(
        self,
        base_optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
        k: int = 5,
        alpha: float = 0.5,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        if not 0.0 < float(alpha) <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self._bases = as_base_list(base_optimizer, Lookahead)
        self.k = k
        self.alpha = float(alpha)
        self._la_step = 0
        self._training = True
        self._eval_backup: dict[torch.Tensor, torch.Tensor] = {}
        super().__init__([g for b in self._bases for g in b.param_groups], {})
        self.defaults = merged_defaults(self._bases, {})

    @property
    def base_optimizers(self) -> list[torch.optim.Optimizer]:
        """The wrapped base optimizers."""
        return list(self._bases)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One fast step; every ``k``-th call also updates the slow weights.

        Raises:
            RuntimeError: In eval mode, or for sparse gradients.
        """
        if not self._training:
            raise RuntimeError("Lookahead.step() called in eval mode; call opt.train() first")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = [p for g in self.param_groups for p in g["params"]]
        check_sparse(params, "Lookahead")
        for p in params:
            if "slow" not in self.state[p]:
                self.state[p]["slow"] = p.detach().clone()
        for base in self._bases:
            base.step()
        self._la_step += 1
        if self._la_step % self.k == 0:
            slow = [self.state[p]["slow"] for p in params]
            torch._foreach_lerp_(slow, params, self.alpha)
            torch._foreach_copy_(params, slow)
        return loss

    @torch.no_grad()
    def eval(self) -> Lookahead:
        """Put the slow weights into the model (fast weights kept aside); idempotent."""
        if self._training:
            for g in self.param_groups:
                for p in g["params"]:
                    if "slow" in self.state[p]:
                        self._eval_backup[p] = p.detach().clone()
                        p.copy_(self.state[p]["slow"])
            self._training = False
        return self

    @torch.no_grad()
    def train(self, mode: bool = True) -> Lookahead:
        """Restore the fast weights; ``train(False)`` is :meth:`eval`."""
        if not mode:
            return self.eval()
        for p, fast in self._eval_backup.items():
            p.copy_(fast)
        self._eval_backup.clear()
        self._training = True
        return self

    def state_dict(self) -> dict[str, Any]:
        """Return ``{"base": [...], "lookahead": {"step", "state", "config"}}``."""
        params = [p for g in self.param_groups for p in g["params"]]
        return {
            "base": [b.state_dict() for b in self._bases],
            "lookahead": {
                "step": self._la_step,
                "state": {
                    i: {"slow": self.state[p]["slow"]}
                    for i, p in enumerate(params)
                    if "slow" in self.state[p]
                },
                "config": {
                    "k": self.k,
                    "alpha": self.alpha,
                    "n_params": len(params),
                    "base_classes": [type(b).__name__ for b in self._bases],
                },
            },
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load :meth:`state_dict` output of a matching wrapper.

        Raises:
            ValueError: If the parameter count or base optimizer classes differ.
        """
        la = state_dict["lookahead"]
        params = [p for g in self.param_groups for p in g["params"]]
        classes = [type(b).__name__ for b in self._bases]
        if la["config"]["base_classes"] != classes:
            raise ValueError(
                f"state_dict has base optimizers {la['config']['base_classes']}, here {classes}"
            )
        if la["config"]["n_params"] != len(params):
            raise ValueError(
                f"state_dict has {la['config']['n_params']} parameters, here {len(params)}"
            )
        for base, sd in zip(self._bases, state_dict["base"], strict=True):
            base.load_state_dict(sd)
        self.param_groups = [g for b in self._bases for g in b.param_groups]
        self.state = defaultdict(dict)
        for i, p in enumerate(params):
            if i in la["state"]:
                self.state[p]["slow"] = la["state"][i]["slow"].to(p, copy=True)
        self._la_step = int(la["step"])
        self._training = True
        self._eval_backup.clear()

    def __repr__(self) -> str:
        bases = ",\n".join("  " + repr(b).replace("\n", "\n  ") for b in self._bases)
        return f"Lookahead(k={self.k}, alpha={self.alpha},\n{bases}\n)"
