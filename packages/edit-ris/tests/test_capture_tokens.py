"""Capture on the tiny editor, token spans (word-level and BPE), stop words, truncation."""

import pytest
import torch

from edit_ris import CaptureSpec, EditRIS, expression_token_span, strip_article

tokenizers = pytest.importorskip("tokenizers")


def test_cross_attention_rows_sum_to_one_with_padding_masked(tiny):
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    instr = ["make the red circle purple", "remove the leftmost small square"]
    cap = tiny.forward_capture(x, instr, 999, 0, capture=CaptureSpec())
    assert set(cap.cross_attn) == {"down16", "down8", "mid8", "up8", "up16"}
    for att in cap.cross_attn.values():
        torch.testing.assert_close(att.sum(-1), torch.ones_like(att.sum(-1)), atol=1e-6, rtol=0)
        assert float(att[..., ~cap.token_mask[0]][0].abs().max()) == 0.0  # padding gets nothing
    for w in cap.self_attn.values():
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5, rtol=0)


def test_capture_on_or_off_gives_the_same_eps(tiny):
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    instr = ["make the red circle purple", "make the blue square red"]
    on = tiny.forward_capture(x, instr, 999, 0, capture=CaptureSpec())
    off = tiny.forward_capture(x, instr, 999, 0, capture=None)
    torch.testing.assert_close(on.eps, off.eps, atol=1e-6, rtol=0)
    # x0 = raw output: the fused kernel and the explicit softmax differ by float32 rounding
    torch.testing.assert_close(on.x0, off.x0, atol=1e-5, rtol=0)


def test_word_level_span_drops_articles_and_stop_words(tiny):
    instr = "make the circle left of the square red"
    span = expression_token_span(tiny, instr, "circle left of the square", start=9)
    # tokens: [BOS] make the circle left of the square red
    assert span == [3, 4, 7]
    assert strip_article("  The  red circle ") == "red circle"


def _bpe_tokenizer(max_length=16):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ["make", "the", "red", "ci", "rc", "le", "circle", "blu", "ish", "sq", "uare"]
    vocab = {
        t: i
        for i, t in enumerate(
            ["<pad>", "<s>", "</s>", "<unk>", *list("abcdefghijklmnopqrstuvwxyz"), *words]
        )
    }
    merges = [
        ("c", "i"),
        ("r", "c"),
        ("l", "e"),
        ("b", "l"),
        ("bl", "u"),
        ("i", "s"),
        ("is", "h"),
        ("s", "q"),
        ("u", "a"),
        ("ua", "r"),
        ("uar", "e"),
    ]
    for m in ["bl", "is", "ua", "uar"]:
        vocab.setdefault(m, len(vocab))
    vocab["uare"] = vocab.get("uare", len(vocab))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=max_length,
    )


def test_bpe_sub_words_are_included():
    tok = _bpe_tokenizer()
    instr = "make the bluish square red"
    enc = tok(instr, return_offsets_mapping=True)
    span = expression_token_span(tok, instr, "bluish square", start=9)
    pieces = [instr[enc["offset_mapping"][k][0] : enc["offset_mapping"][k][1]] for k in span]
    assert "".join(pieces) == "bluishsquare"
    assert len(span) > 2


def test_truncated_expression_is_an_error():
    tok = _bpe_tokenizer(max_length=8)
    with pytest.raises(ValueError, match="truncated"):
        expression_token_span(tok, "make the bluish square red", "bluish square", start=9)


def test_truncation_through_edit_ris(tiny):
    x = torch.rand(1, 3, 32, 32)
    long = "the " + " ".join(["small"] * 12) + " circle"
    with pytest.raises(ValueError, match="truncated"):
        EditRIS(tiny).predict(x, [long])


def test_all_stop_words_is_an_error(tiny):
    with pytest.raises(ValueError, match="filtered"):
        EditRIS(tiny).predict(torch.rand(1, 3, 32, 32), ["the of the"])
