import importlib.util
import sys
from pathlib import Path as FsPath

import numpy as np
import pytest

from preg import Path

# tests/reference.py under a name no other package's tests use: all packages share one run.
_spec = importlib.util.spec_from_file_location(
    "preg_reference", FsPath(__file__).with_name("reference.py")
)
_reference = importlib.util.module_from_spec(_spec)
sys.modules["preg_reference"] = _reference
_spec.loader.exec_module(_reference)


class CharTokenizer:
    """A tiny offline tokenizer: one id per character, id 0 = end of sequence."""

    def __init__(self, chars="abcdefghijklmnopqrstuvwxyz0123456789 =+-.;AQ?"):
        self.chars = chars
        self.eos_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return [self.chars.index(c) + 1 for c in text]

    def decode(self, ids):
        return "".join(self.chars[i - 1] for i in ids if i != 0)


def random_path(rng, n_tokens, answer=None, finished=True, k=4):
    top = -np.sort(rng.exponential(size=(n_tokens, k)), axis=1)
    texts = ["x"] * (n_tokens - 1) + [f"A{answer}."]
    return Path(
        token_ids=list(range(n_tokens)),
        text="".join(texts),
        token_logprobs=-rng.exponential(size=n_tokens),
        token_entropies=rng.exponential(size=n_tokens),
        topk_logprobs=top,
        finished=finished,
        token_texts=texts,
    )


@pytest.fixture
def pools():
    rng = np.random.default_rng(0)
    out = {}
    for q in range(6):
        out[f"q{q}"] = [
            random_path(rng, int(rng.integers(10, 30)), int(rng.integers(0, 3))) for _ in range(24)
        ]
    return out


@pytest.fixture
def char_tokenizer():
    return CharTokenizer()
