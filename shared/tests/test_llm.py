"""methodkit.llm against a loopback OpenAI-compatible server started by the test."""

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from methodkit.llm import (
    ChatBackend,
    ChatReply,
    LLMConnectionError,
    LLMError,
    LLMHTTPError,
    LLMResponseError,
    LLMTimeoutError,
    OpenAIClient,
    check_chat_args,
    first_line,
    parse_choice,
)

OK = {
    "choices": [
        {
            "message": {"role": "assistant", "content": "Paris"},
            "finish_reason": "stop",
            "logprobs": {
                "content": [
                    {
                        "token": "Paris",
                        "logprob": -0.1,
                        "top_logprobs": [
                            {"token": "Paris", "logprob": -0.1},
                            {"token": "Lyon", "logprob": -2.5},
                        ],
                    }
                ]
            },
        }
    ],
    "usage": {"prompt_tokens": 7, "completion_tokens": 1},
}
MSGS = [{"role": "user", "content": "Capital of France?"}]


class Loopback:
    """Answers each POST from a script of steps (the last step repeats); records requests.

    A step is ``(status, body, headers, delay)``: ``body`` a dict (sent as JSON) or bytes.
    """

    def __init__(self, *steps):
        self.steps, self.requests = list(steps), []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                size = int(self.headers.get("Content-Length", 0))
                owner.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "body": json.loads(self.rfile.read(size)),
                        "t": time.monotonic(),
                    }
                )
                k = min(len(owner.requests), len(owner.steps)) - 1
                status, body, headers, delay = owner.steps[k]
                time.sleep(delay)
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def client(url, **kw):
    return OpenAIClient(url, "m", **{"backoff": 0.001, "timeout": 2.0, **kw})


def test_chat_payload_auth_and_logprobs_are_parsed():
    with Loopback((200, OK, None, 0)) as srv:
        (reply,) = client(srv.url, api_key="sk-1").chat(
            MSGS, max_tokens=5, stop=["\n"], seed=3, top_logprobs=2
        )
    (req,) = srv.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["auth"] == "Bearer sk-1"
    assert req["body"] == {
        "model": "m",
        "messages": MSGS,
        "n": 1,
        "temperature": 0.0,
        "max_tokens": 5,
        "stop": ["\n"],
        "seed": 3,
        "logprobs": True,
        "top_logprobs": 2,
    }
    assert isinstance(reply, ChatReply)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("Paris", 7, 1)
    assert reply.finish_reason == "stop"
    assert reply.logprobs[0].token == "Paris"
    assert reply.logprobs[0].logprob == -0.1
    assert reply.logprobs[0].top == {"Paris": -0.1, "Lyon": -2.5}


def test_no_auth_header_and_no_logprobs_unless_asked():
    with Loopback((200, {"choices": [{"message": {"content": "x"}}]}, None, 0)) as srv:
        (reply,) = client(srv.url).chat(MSGS)
    assert srv.requests[0]["auth"] is None
    assert "logprobs" not in srv.requests[0]["body"]
    assert reply.logprobs is None
    assert reply.prompt_tokens == 0


def test_429_then_success_honours_retry_after():
    srv = Loopback((429, {"error": "slow down"}, {"Retry-After": "0.3"}, 0), (200, OK, None, 0))
    with srv:
        c = client(srv.url, backoff=0.001)
        assert c.chat(MSGS)[0].text == "Paris"
    assert len(srv.requests) == 2 == c.n_requests
    assert srv.requests[1]["t"] - srv.requests[0]["t"] >= 0.25  # waited Retry-After, not 1 ms


def test_retry_after_is_capped_by_max_backoff():
    srv = Loopback((503, {}, {"Retry-After": "100"}, 0), (200, OK, None, 0))
    with srv:
        t0 = time.monotonic()
        client(srv.url, max_backoff=0.05).chat(MSGS)
    assert time.monotonic() - t0 < 5


def test_500_forever_gives_up_after_the_retries_naming_url_and_status():
    with Loopback((500, b"boom", None, 0)) as srv:
        c = client(srv.url, max_retries=2)
        with pytest.raises(
            LLMHTTPError, match=r"127\.0\.0\.1.*HTTP 500 after 3 attempt\(s\): boom"
        ):
            c.chat(MSGS)
    assert len(srv.requests) == 3
    with Loopback((500, b"boom", None, 0)) as srv, pytest.raises(LLMHTTPError) as info:
        client(srv.url, max_retries=0).chat(MSGS)
    assert info.value.status == 500
    assert info.value.url.endswith("/v1/chat/completions")
    assert isinstance(info.value, LLMError)
    assert isinstance(info.value, RuntimeError)


def test_a_client_error_is_not_retried():
    srv = Loopback((400, {"error": "bad model"}, None, 0))
    with srv, pytest.raises(LLMHTTPError, match="HTTP 400 after 1 attempt"):
        client(srv.url, max_retries=3).chat(MSGS)
    assert len(srv.requests) == 1


def test_slow_server_times_out_after_retries():
    with Loopback((200, OK, None, 1.0)) as srv:
        c = client(srv.url, timeout=0.15, max_retries=1)
        with pytest.raises(LLMTimeoutError, match=r"did not answer within 0\.15 s \(2 attempt"):
            c.chat(MSGS)
    assert len(srv.requests) == 2


def test_slow_then_fast_succeeds():
    with Loopback((200, OK, None, 1.0), (200, OK, None, 0)) as srv:
        assert client(srv.url, timeout=0.2, max_retries=1).chat(MSGS)[0].text == "Paris"


def test_malformed_json_and_missing_choices_are_response_errors():
    with Loopback((200, b"{not json", None, 0)) as srv:
        with pytest.raises(LLMResponseError, match="malformed JSON"):
            client(srv.url).chat(MSGS)
        assert len(srv.requests) == 1  # not retried
    srv = Loopback((200, [1, 2], None, 0))
    with srv, pytest.raises(LLMResponseError, match="answered list, not an object"):
        client(srv.url).post("/completions", {})
    srv = Loopback((200, {"choices": []}, None, 0))
    with srv, pytest.raises(LLMResponseError, match="no choices"):
        client(srv.url).chat(MSGS)
    assert issubclass(LLMResponseError, ValueError)


def test_connection_refused_on_a_closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    c = client(f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(LLMConnectionError, match=rf"cannot reach .*:{port}/v1.*3 attempt"):
        c.chat(MSGS)
    assert c.n_requests == 3
    assert issubclass(LLMConnectionError, ConnectionError)
    assert issubclass(LLMTimeoutError, TimeoutError)


def test_client_is_a_chat_backend():
    assert isinstance(client("http://127.0.0.1:1/v1"), ChatBackend)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="base_url must be an http"):
        OpenAIClient("localhost:8000", "m")
    with pytest.raises(ValueError, match="timeout must be"):
        OpenAIClient("http://x/v1", "m", timeout=0)
    with pytest.raises(ValueError, match="timeout must be"):
        OpenAIClient("http://x/v1", "m", timeout=float("nan"))
    with pytest.raises(ValueError, match="max_retries must be"):
        OpenAIClient("http://x/v1", "m", max_retries=-1)
    with pytest.raises(ValueError, match="backoff must be"):
        OpenAIClient("http://x/v1", "m", backoff=-1)
    with pytest.raises(ValueError, match="max_backoff must be"):
        OpenAIClient("http://x/v1", "m", max_backoff=float("inf"))


def test_bad_chat_arguments():
    c = client("http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="at least one message"):
        c.chat_body([])
    with pytest.raises(TypeError, match="messages must be a list"):
        c.chat_body("hi")
    with pytest.raises(TypeError, match=r"messages\[0\] must be a mapping"):
        c.chat_body(["hi"])
    with pytest.raises(ValueError, match=r"messages\[0\]\['role'\] must be one of"):
        c.chat_body([{"role": "robot", "content": "x"}])
    with pytest.raises(TypeError, match=r"\['content'\] must be a str"):
        c.chat_body([{"role": "user", "content": 3}])
    with pytest.raises(ValueError, match="n must be >= 1"):
        c.chat_body(MSGS, n=0)
    with pytest.raises(TypeError, match="max_tokens must be an int"):
        c.chat_body(MSGS, max_tokens=2.5)
    with pytest.raises(ValueError, match="temperature must be a finite"):
        c.chat_body(MSGS, temperature=float("nan"))
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        c.chat_body(MSGS, temperature=-1)
    with pytest.raises(TypeError, match="stop must be a list"):
        c.chat_body(MSGS, stop="\n")
    with pytest.raises(TypeError, match="seed must be an int"):
        c.chat_body(MSGS, seed="1")
    with pytest.raises(ValueError, match=r"top_logprobs must be in 1\.\.20"):
        c.chat_body(MSGS, top_logprobs=50)
    assert check_chat_args(MSGS) == MSGS


def test_import_stays_standard_library_only():
    import subprocess

    code = (
        "import sys, methodkit; assert 'methodkit.llm' not in sys.modules; "
        "before = set(sys.modules); import methodkit.llm; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(sorted(new - set(sys.stdlib_module_names) - {'methodkit'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_first_line_is_tolerant():
    assert first_line("  \n'Paris'.\nmore") == "Paris"
    assert first_line("I think so.\nAnswer: 42\n", marker="Answer:") == "42"
    assert first_line("answer = blue", marker="Answer") == "blue"
    assert first_line("Answer:\n42", marker="Answer:") == "42"  # the value on the next line
    assert first_line("no marker here\n2", marker="Answer:") == "no marker here"
    assert first_line("") == ""
    assert first_line(None) == ""


def test_parse_choice_exact_then_first_mention():
    opts = ["detect", "rapidocr", "answer"]
    assert parse_choice("Detect", opts) == "detect"
    assert parse_choice("I would use rapidocr, then answer.", opts) == "rapidocr"
    assert parse_choice("detection is not a tool", opts) is None
    assert parse_choice("red square", ["red", "red square"]) == "red square"
    with pytest.raises(ValueError, match="options must be non-empty strings"):
        parse_choice("x", [])
    with pytest.raises(ValueError, match="options must be non-empty strings"):
        parse_choice("x", ["a", " "])
