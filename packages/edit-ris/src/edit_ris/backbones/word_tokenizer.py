"""WordTokenizer: the tiny editor's whitespace word-level tokenizer with character offsets."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from edit_ris.backbones.base import TokenBatch


class WordTokenizer:
    """Whitespace word-level tokenizer with character offsets: ``[BOS] w1 w2 ... [PAD]*``.

    Args:
        vocab: The words (lower case). Unknown words map to ``[UNK]``.
        max_length: Sequence length including BOS; longer texts are truncated.
    """

    specials = ("[PAD]", "[BOS]", "[UNK]")

    def __init__(self, vocab: Sequence[str], max_length: int = 12) -> None:
        self.vocab = list(self.specials) + [w for w in vocab if w not in self.specials]
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.max_length = int(max_length)

    def __call__(self, texts: Sequence[str]) -> TokenBatch:
        """Tokenize ``texts`` (padded to ``max_length``)."""
        b, n = len(texts), self.max_length
        ids = torch.zeros(b, n, dtype=torch.long)
        offsets = torch.zeros(b, n, 2, dtype=torch.long)
        special = torch.ones(b, n, dtype=torch.bool)
        mask = torch.zeros(b, n, dtype=torch.bool)
        truncated = torch.zeros(b, dtype=torch.bool)
        for i, text in enumerate(texts):
            ids[i, 0], mask[i, 0] = 1, True
            pos, k = 0, 1
            for word in text.split():
                start = text.index(word, pos)
                pos = start + len(word)
                if k >= n:
                    truncated[i] = True
                    break
                ids[i, k] = self.index.get(word.lower(), 2)
                offsets[i, k] = torch.tensor([start, pos])
                special[i, k], mask[i, k] = False, True
                k += 1
        return TokenBatch(ids, offsets, mask, special, truncated)
