import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eva_agent import AlwaysSlow, EVAgent, OpenAIVLM, ShapeColorDetector, ShapeTextVQA
from eva_agent.types import Final, ToolCall
from eva_agent.vlm import ImageNotSupportedError, ReplyParseError, parse_reply
from methodkit.llm import LLMConnectionError
from methodkit.testing import LoopbackChatServer, check_chat_backend


class FakeServer:
    """A loopback OpenAI-compatible server replying from a script; records the payloads."""

    def __init__(self, replies, status=200):
        self.replies, self.payloads, self.status = list(replies), [], status
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.payloads.append(body)
                if outer.status != 200:
                    self.send_response(outer.status)
                    self.end_headers()
                    self.wfile.write(b'{"error": "image input is not supported"}')
                    return
                msg = outer.replies.pop(0) if outer.replies else {"content": "x"}
                data = json.dumps(
                    {
                        "choices": [
                            {
                                "message": {"content": msg.get("content")},
                                "logprobs": msg.get("logprobs"),
                            }
                        ]
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def item():
    return ShapeTextVQA(6, seed=0)[2]  # a count question


def test_openai_payload_has_a_data_url_and_logprobs_are_parsed(item):
    lp = {"content": [{"logprob": math.log(0.5)}, {"logprob": math.log(0.8)}]}
    srv = FakeServer([{"content": "5", "logprobs": lp}])
    try:
        text, conf = OpenAIVLM(srv.url, "m").answer(item.image, item.question)
        part = srv.payloads[0]["messages"][0]["content"][0]
        assert part["type"] == "image_url"
        assert part["image_url"]["url"].startswith("data:image/png;base64,")
        assert srv.payloads[0]["logprobs"] is True
        assert text == "5"
        assert conf == pytest.approx(math.sqrt(0.4))
    finally:
        srv.close()


def test_openai_agreement_confidence_without_logprobs(item):
    srv = FakeServer([{"content": "5"}, {"content": "5"}, {"content": "6"}])
    try:
        _, conf = OpenAIVLM(srv.url, "m", samples=3).answer(item.image, item.question)
        assert conf == pytest.approx(2 / 3)
        assert len(srv.payloads) == 3
    finally:
        srv.close()


def test_openai_malformed_tool_call_one_repair_then_parse_failure(item):
    srv = FakeServer(
        [
            {"content": '{"tool": "detect", "args": {"color": "red"'},
            {"content": '{"tool": "detect", "args": {}}'},
        ]
    )
    try:
        step = OpenAIVLM(srv.url, "m").plan(item.image, item.question, [])
        assert step == ToolCall("detect", {})
        assert len(srv.payloads) == 2
    finally:
        srv.close()
    srv = FakeServer([{"content": "I would look"}, {"content": "still no json"}, {"content": "3"}])
    try:
        vlm = OpenAIVLM(srv.url, "m")
        with pytest.raises(ReplyParseError, match="after one repair retry"):
            vlm.plan(item.image, item.question, [])
    finally:
        srv.close()
    srv = FakeServer(
        [
            {"content": "4", "logprobs": {"content": [{"logprob": -2.0}]}},
            {"content": "nope"},
            {"content": "nope"},
            {"content": "4"},
            {"content": "4"},
        ]
    )
    try:
        res = EVAgent(OpenAIVLM(srv.url, "m"), [ShapeColorDetector()], AlwaysSlow()).run(
            item.image, item.question, item.qtype
        )
        assert res.ledger[0].tool == "(parse)"
        assert res.ledger[0].status == "error"
    finally:
        srv.close()


def test_openai_without_image_support_is_explicit(item):
    srv = FakeServer([], status=400)
    try:
        with pytest.raises(ImageNotSupportedError, match="rejected the image content part"):
            OpenAIVLM(srv.url, "m").answer(item.image, item.question)
    finally:
        srv.close()
    with pytest.raises(ValueError, match="base_url must be an http"):
        OpenAIVLM("localhost:8000", "m")


def test_parse_reply_table():
    assert parse_reply('ok {"final": "B42"}') == Final("B42")
    assert parse_reply('{"tool": "rapidocr", "args": {"scale": 2}}') == ToolCall(
        "rapidocr", {"scale": 2}
    )
    for bad in ["", "no json", '{"tool": 3}', '{"tool": "x", "args": [1]}', "{bad json}"]:
        with pytest.raises(ReplyParseError):
            parse_reply(bad)


def test_openai_vlm_chat_passes_the_contract_on_loopback():
    with LoopbackChatServer() as srv:
        vlm = OpenAIVLM(srv.url, "m", timeout=5)
        done = check_chat_backend(vlm)
    assert done["one reply"] == repr("you said: Name a colour.")
    assert vlm.n_requests == len(srv.bodies)


def test_openai_vlm_retries_and_names_the_url_on_a_dead_server(item):
    with LoopbackChatServer(failures=[503, 429]) as srv:
        vlm = OpenAIVLM(srv.url, "m", backoff=0.001, samples=1)
        assert vlm.answer(None, "Say hi")[0].startswith("you said:")
    assert vlm.n_requests == 3
    vlm = OpenAIVLM(srv.url, "m", max_retries=1, backoff=0.001)  # the server is closed now
    with pytest.raises(LLMConnectionError, match=r"cannot reach http://127\.0\.0\.1"):
        vlm.answer(item.image, item.question)


@pytest.mark.slow
def test_hf_vlm_chat_on_tiny_smollm2_passes_the_contract():
    pytest.importorskip("transformers")
    from eva_agent import HFVLM
    from methodkit.smollm2 import tiny_smollm2

    done = check_chat_backend(HFVLM(*tiny_smollm2(), text_only=True), max_tokens=6)
    assert done["bad arguments"] == "7 of 7 rejected"
