"""The captioning-policy protocol and wrappers for Hugging Face models.

A policy samples completions for a batch of B inputs (``G`` per input, group-major), scores
token log-probs of given completions, and decodes tokens to text. A batch is a mapping of
tensors (model inputs, first dimension B) and lists (columns such as ``gold_events``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

__all__ = [
    "CaptionPolicy",
    "HFCausalPolicy",
    "HFSeq2SeqPolicy",
    "TrainablePolicy",
    "completion_mask",
    "index_batch",
    "repeat_columns",
]


@runtime_checkable
class CaptionPolicy(Protocol):
    """What :class:`~eva_cap.GRPOTrainer` and :func:`~eva_cap.sft_train` need of a policy."""

    def sample(
        self,
        inputs: Mapping[str, Any],
        num_generations: int,
        max_len: int,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tokens [B*G, T], mask [B*G, T])``; ``temperature == 0`` is greedy."""
        ...

    def token_logprobs(
        self, inputs: Mapping[str, Any], tokens: torch.Tensor, temperature: float = 1.0
    ) -> torch.Tensor:
        """``[B*k, T]`` log-probs of ``tokens`` (inputs repeated k times, group-major)."""
        ...

    def decode(self, tokens: torch.Tensor) -> list[str]:
        """Completions as text (up to the first end-of-sequence token)."""
        ...


class TrainablePolicy(CaptionPolicy, Protocol):
    """A :class:`CaptionPolicy` that is also trained: the ``nn.Module`` members the trainers use."""

    training: bool

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The trained parameters."""
        ...

    def train(self, mode: bool = True) -> Any:
        """Training mode on (``mode=True``) or off."""
        ...

    def eval(self) -> Any:
        """Evaluation mode."""
        ...


def index_batch(batch: Mapping[str, Any], idx: Sequence[int] | np.ndarray) -> dict[str, Any]:
    """Rows ``idx`` of every tensor and list in ``batch`` (other values kept as they are)."""
    out: dict[str, Any] = {}
    ids = list(idx)
    for k, v in batch.items():
        if isinstance(v, torch.Tensor):
            out[k] = v[torch.as_tensor(ids, dtype=torch.long, device=v.device)]
        elif isinstance(v, list | tuple):
            out[k] = [v[i] for i in ids]
        else:
            out[k] = v
    return out


def repeat_columns(batch: Mapping[str, Any], G: int) -> dict[str, list]:
    """The list-valued columns of ``batch`` with each row repeated ``G`` times (as TRL does)."""
    return {k: [x for x in v for _ in range(G)] for k, v in batch.items()
            if isinstance(v, list | tuple)}  # fmt: skip


def completion_mask(tokens: torch.Tensor, eos_id: int) -> torch.Tensor:
    """1 up to and including the first ``eos_id`` of each row, 0 after."""
    is_eos = tokens == eos_id
    after = (is_eos.cumsum(1) - is_eos.long()) > 0  # strictly after the first EOS
    return (~after).long()


def _tensors(batch: Mapping[str, Any], keys: Sequence[str] | None) -> dict[str, torch.Tensor]:
    if keys is not None:
        return {k: batch[k] for k in keys}
    return {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}


def _repeat(inputs: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    return {n: v.repeat_interleave(k, dim=0) for n, v in inputs.items()}


def _ids(tokenizer: Any, model: Any) -> tuple[int, int]:
    gen = getattr(model, "generation_config", None)
    eos = getattr(tokenizer, "eos_token_id", None)
    eos = eos if eos is not None else getattr(gen, "eos_token_id", None)
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = pad if pad is not None else getattr(gen, "pad_token_id", None)
    if isinstance(eos, list):
        eos = eos[0]
    if eos is None:
        raise ValueError("the tokenizer or the model's generation_config must define eos_token_id")
    return int(eos), int(pad if pad is not None else eos)


class _HFPolicy:
    def __init__(self, model: Any, tokenizer: Any, input_keys: Sequence[str] | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.input_keys = list(input_keys) if input_keys is not None else None
        self.eos_id, self.pad_id = _ids(tokenizer, model)

    # nn.Module-like surface used by GRPOTrainer
    def parameters(self) -> Any:
        """The wrapped model's parameters."""
        return self.model.parameters()

    @property
    def training(self) -> bool:
        return bool(self.model.training)

    def train(self, mode: bool = True) -> _HFPolicy:
        """Set the wrapped model's training mode."""
        self.model.train(mode)
        return self

    def eval(self) -> _HFPolicy:
        """Evaluation mode."""
        return self.train(False)

    def __deepcopy__(self, memo: dict) -> _HFPolicy:
        import copy

        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.model = copy.deepcopy(self.model, memo)
        return new

    def _generate(
        self, inputs: dict, num_generations: int, max_len: int, temperature: float
    ) -> torch.Tensor:
        kw: dict[str, Any] = {"max_new_tokens": max_len, "num_return_sequences": num_generations,
                              "pad_token_id": self.pad_id, "eos_token_id": self.eos_id}  # fmt: skip
        if temperature > 0:
            kw.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
        else:
            kw.update(do_sample=False)
        return self.model.generate(**inputs, **kw)

    def _clean(self, comp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mask = completion_mask(comp, self.eos_id)
        return comp.masked_fill(mask == 0, self.pad_id), mask

    def decode(self, tokens: torch.Tensor) -> list[str]:
        mask = completion_mask(tokens, self.eos_id)
        rows = [t[m.bool()].tolist() for t, m in zip(tokens, mask, strict=True)]
        return [s.strip() for s in self.tokenizer.batch_decode(rows, skip_special_tokens=True)]


class HFSeq2SeqPolicy(_HFPolicy):
    """An HF encoder-decoder (or multimodal seq2seq) model as a :class:`CaptionPolicy`.

    The batch's tensors (or ``input_keys``) are passed to ``model.generate`` and to the
    forward pass (``input_ids``/``attention_mask``, ``input_features``, ``pixel_values``...).
    Sampling uses ``top_k=0, top_p=1`` (plain temperature sampling, as GRPO assumes) and
    torch's global RNG (``generate`` takes no generator): seed it in the calling script.

    Args:
        model: A ``transformers`` ``AutoModelForSeq2SeqLM``-like model.
        tokenizer: Its tokenizer (``batch_decode``, ``eos_token_id``, ``pad_token_id``).
        input_keys: Batch entries that are model inputs (default: every tensor).
    """

    def sample(
        self,
        inputs: Mapping[str, Any],
        num_generations: int,
        max_len: int,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Completions of every input (``generator`` unused: HF samples from torch's RNG)."""
        out = self._generate(_tensors(inputs, self.input_keys), num_generations, max_len,
                             temperature)  # fmt: skip
        return self._clean(out[:, 1:])  # drop the decoder start token

    def token_logprobs(
        self, inputs: Mapping[str, Any], tokens: torch.Tensor, temperature: float = 1.0
    ) -> torch.Tensor:
        """Log-probs of the completion tokens (inputs repeated to their rows)."""
        x = _tensors(inputs, self.input_keys)
        k = tokens.shape[0] // next(iter(x.values())).shape[0]
        start = self.model.config.decoder_start_token_id
        start = self.pad_id if start is None else start
        dec_in = torch.cat([torch.full_like(tokens[:, :1], start), tokens[:, :-1]], dim=1)
        logits = self.model(**_repeat(x, k), decoder_input_ids=dec_in).logits.float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        return logp.gather(-1, tokens[..., None]).squeeze(-1)


class HFCausalPolicy(_HFPolicy):
    """An HF decoder-only (or omni) model as a :class:`CaptionPolicy`.

    The batch holds the left-padded prompt ``input_ids`` and ``attention_mask`` (plus any
    multimodal tensors in ``input_keys``); completions are the tokens after the prompt.
    Sampling uses torch's global RNG, as :class:`HFSeq2SeqPolicy`.

    Args:
        model: A ``transformers`` ``AutoModelForCausalLM``-like model.
        tokenizer: Its tokenizer.
        input_keys: Batch entries that are model inputs (default: every tensor).
    """

    def sample(
        self,
        inputs: Mapping[str, Any],
        num_generations: int,
        max_len: int,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Completions of every input (``generator`` unused: HF samples from torch's RNG)."""
        x = _tensors(inputs, self.input_keys)
        out = self._generate(x, num_generations, max_len, temperature)
        return self._clean(out[:, x["input_ids"].shape[1] :])

    def token_logprobs(
        self, inputs: Mapping[str, Any], tokens: torch.Tensor, temperature: float = 1.0
    ) -> torch.Tensor:
        """Log-probs of the completion tokens (inputs repeated to their rows)."""
        x = _tensors(inputs, self.input_keys)
        k = tokens.shape[0] // x["input_ids"].shape[0]
        x = _repeat(x, k)
        prompt, pmask = x.pop("input_ids"), x.pop("attention_mask")
        ids = torch.cat([prompt, tokens], dim=1)
        attn = torch.cat([pmask, torch.ones_like(tokens)], dim=1)
        pos = (attn.cumsum(1) - 1).clamp(min=0)
        logits = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, **x).logits
        logits = logits[:, prompt.shape[1] - 1 : -1].float()
        logp = torch.log_softmax(logits / temperature, dim=-1)
        return logp.gather(-1, tokens[..., None]).squeeze(-1)
