"""Every chat back-end passes the core's contract (methodkit.testing.check_chat_backend)."""

import pytest

from evochamber import HFChatModel, OpenAIChatModel, ScriptedChatModel
from evochamber.backends import ChatModel
from methodkit.testing import LoopbackChatServer, check_chat_backend, echo_reply


def test_scripted_chat_model_passes_the_contract():
    done = check_chat_backend(ScriptedChatModel(echo_reply))
    assert done["bad arguments"] == "7 of 7 rejected"
    assert isinstance(ScriptedChatModel(["x"]), ChatModel)


def test_openai_chat_model_passes_the_contract_on_loopback():
    with LoopbackChatServer() as srv:
        done = check_chat_backend(OpenAIChatModel(srv.url, "m", timeout=5))
    assert done["one reply"] == repr("you said: Name a colour.")


def test_openai_chat_model_retries_through_the_core_client():
    with LoopbackChatServer(failures=[503]) as srv:
        m = OpenAIChatModel(srv.url, "m", backoff=0.001)
        assert m.chat([{"role": "user", "content": "hi"}])[0].text == "you said: hi"
    assert m.n_requests == 2


@pytest.mark.slow
def test_hf_chat_model_on_tiny_smollm2_passes_the_contract():
    pytest.importorskip("transformers")
    from methodkit.smollm2 import tiny_smollm2

    done = check_chat_backend(HFChatModel(*tiny_smollm2()), max_tokens=6)
    assert done["bad arguments"] == "7 of 7 rejected"


def test_openai_chat_model_sends_prefill_extra_only_with_an_assistant_prefix():
    extra = {"continue_final_message": True, "add_generation_prompt": False}
    with LoopbackChatServer() as srv:
        m = OpenAIChatModel(srv.url, "m", prefill_extra=extra)
        m.chat([{"role": "user", "content": "hi"}])
        m.chat([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "Answer:"}])
    plain, prefilled = srv.bodies
    assert "continue_final_message" not in plain
    assert prefilled["continue_final_message"] is True
    assert prefilled["add_generation_prompt"] is False
    assert prefilled["messages"][-1] == {"role": "assistant", "content": "Answer:"}
    with pytest.raises(TypeError, match="prefill_extra must be a mapping"):
        OpenAIChatModel(srv.url, "m", prefill_extra=["continue_final_message"])


@pytest.mark.slow
def test_hf_chat_model_continues_a_final_assistant_message():
    pytest.importorskip("transformers")
    from methodkit.smollm2 import tiny_smollm2

    model, tok = tiny_smollm2()
    chat = HFChatModel(model, tok)
    msgs = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "Answer:"}]
    (reply,) = chat.chat(msgs, max_tokens=4)
    # the prompt ends with the prefix, not with a new assistant turn
    prompt_ids = tok.apply_chat_template(msgs, continue_final_message=True, tokenize=True)
    if hasattr(prompt_ids, "keys"):
        prompt_ids = prompt_ids["input_ids"]
    assert tok.decode(prompt_ids).endswith("assistant\nAnswer:")
    assert reply.prompt_tokens == len(prompt_ids)
