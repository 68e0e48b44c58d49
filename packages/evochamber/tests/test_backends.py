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
