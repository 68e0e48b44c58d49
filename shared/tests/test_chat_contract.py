"""The chat back-end contract: it passes on the core client and bites on broken back-ends."""

from dataclasses import dataclass

import pytest

from methodkit.llm import LLMHTTPError, OpenAIClient, check_chat_args
from methodkit.testing import LoopbackChatServer, check_chat_backend, echo_reply


@dataclass
class Reply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Echo:
    """A minimal correct back-end; flags switch one behaviour off."""

    def __init__(self, validate=True, honour_stop=True, count=None, greedy_drift=False):
        self.validate, self.honour_stop, self.count = validate, honour_stop, count
        self.greedy_drift, self.calls = greedy_drift, 0

    def chat(self, messages, *, n=1, temperature=0.0, max_tokens=256, stop=None, seed=None):
        if self.validate:
            check_chat_args(messages, n=n, temperature=temperature, max_tokens=max_tokens,
                            stop=stop, seed=seed)  # fmt: skip
        self.calls += 1
        text = " ".join(echo_reply(messages).split()[:max_tokens])
        if self.greedy_drift:
            text += str(self.calls)
        for s in (stop or ()) if self.honour_stop else ():
            text = text.split(s)[0]
        tokens = len(text.split()) if self.count is None else self.count
        return [Reply(text, 3, tokens) for _ in range(n)]


def test_a_correct_backend_passes_every_check():
    done = check_chat_backend(Echo())
    assert set(done) == {"one reply", "greedy repeats", "multi-turn + non-ASCII", "stop",
                         "seeded sampling repeats", "bad arguments"}  # fmt: skip
    assert done["bad arguments"] == "7 of 7 rejected"


@pytest.mark.parametrize(
    ("backend", "match"),
    [
        (Echo(validate=False), r"bad argument \(empty messages\)"),
        (Echo(honour_stop=False), "stop: with stop="),
        (Echo(count=99), "used 99 tokens > max_tokens=8"),
        (Echo(count=-1), "completion_tokens must be an int >= 0"),
        (Echo(greedy_drift=True), "greedy: n=3 greedy replies"),
        (object(), "has no chat"),
    ],
)
def test_the_contract_bites(backend, match):
    with pytest.raises(AssertionError, match=match):
        check_chat_backend(backend)


def test_the_core_client_passes_against_the_loopback_server():
    with LoopbackChatServer() as srv:
        done = check_chat_backend(OpenAIClient(srv.url, "m", timeout=5))
    assert done["one reply"] == repr("you said: Name a colour.")
    assert srv.bodies[0]["max_tokens"] == 8


def test_loopback_server_failures_then_success():
    with LoopbackChatServer(failures=[503, 429]) as srv:
        c = OpenAIClient(srv.url, "m", backoff=0.001, max_retries=2)
        assert c.chat([{"role": "user", "content": "hi"}])[0].text == "you said: hi"
    assert len(srv.bodies) == 3
    with LoopbackChatServer(failures=[418]) as srv, pytest.raises(LLMHTTPError, match="HTTP 418"):
        OpenAIClient(srv.url, "m").chat([{"role": "user", "content": "hi"}])
