import numpy as np
import pytest

from preg import PrefixGuidedSampler, RegexExtractor
from preg.generators.openai_compat import OpenAICompatGenerator
from preg.generators.server import serve_completions

pytestmark = pytest.mark.slow  # importing transformers' GPT-2 costs ~30 s here

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_gpt2():
    cfg = transformers.GPT2Config(
        vocab_size=46,
        n_positions=96,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def test_hf_logprobs_equal_teacher_forcing_and_prefix_kept(tiny_gpt2, char_tokenizer):
    from preg.generators.hf import HFGenerator

    gen = HFGenerator(tiny_gpt2, char_tokenizer, top_k=5, batch_size=3)
    prompt = "q12+3?"
    paths = gen.sample(prompt, 4, 10, seed=0)
    base = char_tokenizer.encode(prompt)
    with torch.no_grad():
        for p in paths:
            ids = torch.tensor([base + p.token_ids])
            lp = torch.log_softmax(tiny_gpt2(ids).logits[0].double(), -1)
            want = lp[len(base) - 1 : -1].gather(-1, torch.tensor(p.token_ids)[:, None])[:, 0]
            np.testing.assert_allclose(p.token_logprobs, want.numpy(), atol=1e-5)
            ent = -(lp.exp() * lp).sum(-1)[len(base) - 1 : -1]
            np.testing.assert_allclose(p.token_entropies, ent.numpy(), atol=1e-5)
    prefixes = [p.truncate(4) for p in paths if not p.finished or p.n_tokens > 4]
    grown = gen.continue_(prompt, prefixes, 12, seed=1)
    for pre, g in zip(prefixes, grown, strict=True):
        assert g.token_ids[:4] == pre.token_ids
        np.testing.assert_allclose(g.token_logprobs[:4], pre.token_logprobs)
        assert g.n_tokens <= 12


def test_hf_sample_entry_point(tiny_gpt2, char_tokenizer):
    import preg

    res = preg.sample(
        tiny_gpt2,
        char_tokenizer,
        "q1+2?",
        n_prefixes=4,
        keep=2,
        prefix_len=3,
        max_new_tokens=8,
        seed=0,
    )
    assert len(res.paths) == 2
    assert res.total_tokens == res.prefix_tokens + res.completion_tokens <= 4 * 3 + 2 * 5


def test_openai_client_against_loopback_server(tiny_gpt2, char_tokenizer):
    from preg.generators.hf import HFGenerator

    server, url = serve_completions(HFGenerator(tiny_gpt2, char_tokenizer, top_k=5))
    try:
        client = OpenAICompatGenerator(url, "tiny", top_logprobs=3)
        paths = client.sample("q1+2?", 3, 6, seed=0)
        assert len(paths) == 3
        assert all(p.topk_logprobs.shape == (p.n_tokens, 3) for p in paths)
        s = PrefixGuidedSampler(
            client,
            RegexExtractor(r"(\d)"),
            n_prefixes=4,
            prefix_len=2,
            keep=2,
            max_new_tokens=6,
            seed=0,
        )
        res = s.run("q1+2?")
        for p in res.paths:
            assert p.n_tokens <= 6
        assert res.total_tokens == res.prefix_tokens + res.completion_tokens
    finally:
        server.shutdown()
        server.server_close()


def test_openai_clear_error_without_logprobs(tiny_gpt2, char_tokenizer):
    from preg.generators.hf import HFGenerator

    server, url = serve_completions(HFGenerator(tiny_gpt2, char_tokenizer), with_logprobs=False)
    try:
        with pytest.raises(RuntimeError, match="no token logprobs"):
            OpenAICompatGenerator(url, "tiny").sample("q1?", 2, 4)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ValueError, match="mode must be"):
        OpenAICompatGenerator(url, "tiny", mode="chat")
