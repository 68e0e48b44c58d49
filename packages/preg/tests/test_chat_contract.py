"""preg's back-ends, seen as chat models, pass the core's chat contract."""

import pytest

from methodkit.llm import LLMResponseError
from methodkit.testing import check_chat_backend
from preg.generators import GeneratorChat
from preg.generators.openai_compat import OpenAICompatGenerator
from preg.generators.server import serve_completions


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("transformers")
    from methodkit.smollm2 import tiny_smollm2

    return tiny_smollm2()


@pytest.mark.slow
def test_hf_generator_passes_the_chat_contract(tiny):
    from preg.generators.hf import HFGenerator

    done = check_chat_backend(GeneratorChat(HFGenerator(*tiny)), max_tokens=6)
    assert done["bad arguments"] == "7 of 7 rejected"


@pytest.mark.slow
def test_openai_compat_generator_passes_the_chat_contract_on_loopback(tiny):
    from preg.generators.hf import HFGenerator

    model, tok = tiny
    server, url = serve_completions(HFGenerator(model, tok))
    try:
        gen = OpenAICompatGenerator(url, "tiny", top_logprobs=2)
        chat = GeneratorChat(
            gen, lambda m: tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
        )
        done = check_chat_backend(chat, max_tokens=6)
        # the same greedy reply as the model in process
        direct = GeneratorChat(HFGenerator(model, tok)).chat(
            [{"role": "user", "content": "Name a colour."}], max_tokens=6
        )
        assert done["one reply"] == repr(direct[0].text)
    finally:
        server.shutdown()
        server.server_close()


def test_generator_chat_rejects_a_non_generator():
    with pytest.raises(TypeError, match="generator must have a sample"):
        GeneratorChat(object())


def test_generator_chat_needs_render_for_a_text_prompt_generator():
    """Messages sent as a text prompt used to fail deep inside (list + str, unhashable list)."""
    from preg.generators import PoolGenerator

    for gen in (OpenAICompatGenerator("http://127.0.0.1:9", "m"), PoolGenerator({})):
        with pytest.raises(TypeError, match="samples from text prompts, not chat messages"):
            GeneratorChat(gen)
        assert GeneratorChat(gen, render=str).render is str


def test_server_errors_are_the_core_error_types(char_tokenizer):
    server, url = serve_completions(object())  # every request fails inside the handler
    server.shutdown()
    server.server_close()
    gen = OpenAICompatGenerator(url, "m", max_retries=1, backoff=0.001)
    with pytest.raises(ConnectionError, match=r"cannot reach http://127\.0\.0\.1.*2 attempt"):
        gen.sample("hi", 1, 4)
    assert issubclass(LLMResponseError, RuntimeError)
