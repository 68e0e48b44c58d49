import functools
import operator

import numpy as np
import pytest
import torch

from emo_moe import (
    DOMAINS,
    ByteTokenizer,
    build_offline_corpus,
    modularity_nmi,
    pack_documents,
    split_documents,
)


@pytest.fixture(scope="module")
def corpus():
    return build_offline_corpus(0, 20_000)


def test_corpus_domains_budget_and_hash(corpus):
    assert set(corpus.documents) == set(DOMAINS)
    for d in DOMAINS:
        assert 0 < corpus.sizes[d] <= 20_000
        assert all(len(doc.encode()) <= 4096 for doc in corpus.documents[d])
    assert corpus.content_hash == build_offline_corpus(0, 20_000).content_hash
    assert corpus.content_hash != build_offline_corpus(1, 20_000).content_hash  # generated parts
    assert "def " in "".join(corpus.documents["code"])


def test_split_is_deterministic_and_partitions(corpus):
    docs = corpus.documents["math"]
    a = split_documents(docs)
    assert a == split_documents(docs)
    assert sorted(functools.reduce(operator.iadd, a, [])) == sorted(docs)
    assert split_documents(list(reversed(docs)))[2] == list(reversed(a[2]))  # by content


def test_tokenizer_and_packing():
    tok = ByteTokenizer()
    assert tok.decode(tok.encode("héllo", add_eos=True)) == "héllo"
    rows = pack_documents(["abc", "de"], 4, drop_last=False)
    assert rows.tolist() == [[97, 98, 99, 256], [100, 101, 256, 257]]
    assert pack_documents(["abc", "de"], 4).shape == (1, 4)


def test_nmi_is_one_for_separated_domains_and_low_for_noise():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 10)
    centres = np.eye(4) * 10
    usage = centres[labels] + rng.normal(0, 0.1, (40, 4))
    assert modularity_nmi(usage, labels) == pytest.approx(1.0)
    assert modularity_nmi(rng.normal(size=(40, 4)), labels) < 0.5


def test_pack_keeps_doc_ids_contiguous():
    from emo_moe import doc_ids_from_eos, validate_doc_ids

    rows = pack_documents(["a" * 5, "b" * 9, "c"], 6, drop_last=False)
    validate_doc_ids(doc_ids_from_eos(rows, 256), rows.shape)
    assert torch.equal(rows.flatten()[:6], torch.tensor([97] * 5 + [256]))
