"""HFGenerator on tiny weightless transformers configs: devices, BOS, chat, stops, errors."""

import numpy as np
import pytest

from preg import PrefixGuidedSampler, RegexExtractor, SelfConsistency

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


class BosCharTokenizer:
    """One id per character (id 0 = EOS, id 1 = BOS), with the HF tokenizer settings."""

    chars = "abcdefghijklmnopqrstuvwxyz0123456789 =+-.;AQ?\n"

    def __init__(self, add_bos_token=True):
        self.eos_token_id, self.bos_token_id, self.add_bos_token = 0, 1, add_bos_token

    def __len__(self):
        return len(self.chars) + 2

    def encode(self, text, add_special_tokens=False):
        return [self.chars.index(c) + 2 for c in text]

    def decode(self, ids):
        return "".join(self.chars[i - 2] for i in ids if i > 1)

    def apply_chat_template(self, messages, add_generation_prompt=False, return_tensors=None):
        text = "".join(f"{m['role'][0]}{m['content']};" for m in messages) + "a" * bool(
            add_generation_prompt
        )
        ids = [1, *self.encode(text)]
        if return_tensors == "pt":  # what transformers 5.x returns
            return transformers.BatchEncoding({"input_ids": torch.tensor([ids])})
        return ids


@pytest.fixture(scope="module")
def tiny_llama():
    cfg = transformers.LlamaConfig(
        vocab_size=len(BosCharTokenizer()),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def teacher_forced(model, ids, new):
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids + new])).logits[0].double(), -1)
    return lp[len(ids) - 1 : -1].gather(-1, torch.tensor(new)[:, None])[:, 0].numpy()


def test_bos_added_only_when_the_tokenizer_says_so(tiny_llama):
    from preg.generators.hf import HFGenerator

    tok = BosCharTokenizer(add_bos_token=True)
    assert HFGenerator(tiny_llama, tok).encode("q1+2?") == [1, *tok.encode("q1+2?")]
    tok_off = BosCharTokenizer(add_bos_token=False)
    assert HFGenerator(tiny_llama, tok_off).encode("q1+2?") == tok_off.encode("q1+2?")


def test_chat_messages_through_the_template(tiny_llama):
    from preg.generators.hf import HFGenerator

    tok = BosCharTokenizer()
    gen = HFGenerator(tiny_llama, tok, top_k=3)
    msgs = [{"role": "user", "content": "q1+2?"}]
    ids = gen.encode(msgs)
    assert ids == tok.apply_chat_template(msgs, add_generation_prompt=True)
    paths = gen.sample(msgs, 2, 5, seed=0)
    for p in paths:
        np.testing.assert_allclose(
            p.token_logprobs, teacher_forced(tiny_llama, ids, p.token_ids), atol=1e-5
        )


def test_shared_prompt_cache_logprobs_and_prefix_continuation(tiny_llama):
    from preg.generators.hf import HFGenerator

    tok = BosCharTokenizer()
    gen = HFGenerator(tiny_llama, tok, top_k=4, batch_size=3)
    prompt = "q12+3?"
    base = gen.encode(prompt)
    paths = gen.sample(prompt, 5, 8, seed=0)
    for p in paths:
        np.testing.assert_allclose(
            p.token_logprobs, teacher_forced(tiny_llama, base, p.token_ids), atol=1e-5
        )
    prefixes = [p.truncate(3) for p in paths if not p.finished or p.n_tokens > 3]
    grown = gen.continue_(prompt, prefixes, 10, seed=1)
    for pre, g in zip(prefixes, grown, strict=True):
        assert g.token_ids[:3] == pre.token_ids
        np.testing.assert_allclose(
            g.token_logprobs, teacher_forced(tiny_llama, base, g.token_ids), atol=1e-5
        )
    # the same seed gives the same paths
    again = gen.sample(prompt, 5, 8, seed=0)
    assert [p.token_ids for p in again] == [p.token_ids for p in paths]


def test_model_stays_on_its_device_and_dtype(tiny_llama):
    from preg.generators.hf import HFGenerator

    model = transformers.LlamaForCausalLM(tiny_llama.config).to(torch.float64).eval()

    def no_move(*args, **kwargs):
        raise AssertionError("HFGenerator moved the model")

    model.to = no_move
    gen = HFGenerator(model, BosCharTokenizer())
    assert gen.device == torch.device("cpu")
    paths = gen.sample("q1?", 2, 4, seed=0)
    assert next(model.parameters()).dtype == torch.float64
    assert all(p.n_tokens <= 4 for p in paths)


def test_stop_strings_finish_a_path(tiny_llama):
    from preg.generators.hf import HFGenerator

    tok = BosCharTokenizer()
    gen = HFGenerator(tiny_llama, tok, stop_strings=["\n", "."])
    assert gen.stop_ids == {0, tok.encode("\n")[0], tok.encode(".")[0]}
    for p in gen.sample("q1?", 8, 30, seed=0):
        stops = [i for i, t in enumerate(p.token_ids) if t in gen.stop_ids]
        assert stops in ([], [p.n_tokens - 1])
        assert p.finished == bool(stops)
    with pytest.raises(ValueError, match="stop_strings must be non-empty"):
        HFGenerator(tiny_llama, tok, stop_strings=[""])


def test_clear_errors_for_none_prompt_and_unhashable_answers(tiny_llama):
    from preg.generators.hf import HFGenerator

    gen = HFGenerator(tiny_llama, BosCharTokenizer())
    ex = RegexExtractor(r"(\d)")
    s = PrefixGuidedSampler(gen, ex, n_prefixes=2, keep=1, prefix_len=2, max_new_tokens=4)
    with pytest.raises(TypeError, match="prompt must be a str or a non-empty list"):
        s.run(None)
    with pytest.raises(TypeError, match="prompt must be a str or a non-empty list"):
        SelfConsistency(gen, ex, n=2, max_new_tokens=4).run([])
    with pytest.raises(TypeError, match="prompt must be a str or a non-empty list"):
        gen.sample(None, 2, 4)
    bad = PrefixGuidedSampler(
        gen, lambda text: {"answer": text}, n_prefixes=2, keep=1, prefix_len=2, max_new_tokens=4
    )
    with pytest.raises(TypeError, match="extractor returned an unhashable dict"):
        bad.run("q1?", seed=0)
