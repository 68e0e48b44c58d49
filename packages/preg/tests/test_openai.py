import json
import threading
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from preg.generators.openai_compat import OpenAICompatGenerator


class _Fake(BaseHTTPRequestHandler):
    payloads: typing.ClassVar[list] = []
    failures = 0

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).payloads.append(body)
        if type(self).failures > 0:
            type(self).failures -= 1
            self.send_response(429 if type(self).failures % 2 else 503)
            self.end_headers()
            return
        choice = {
            "text": " 7",
            "finish_reason": "stop",
            "logprobs": {
                "tokens": [" ", "7"],
                "token_logprobs": [-0.5, -0.25],
                "top_logprobs": [{" ": -0.5, "x": -1.5}, {"7": -0.25, "8": -2.0}],
            },
        }
        data = json.dumps({"choices": [choice] * int(body.get("n", 1))}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_server():
    _Fake.payloads, _Fake.failures = [], 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_openai_payload_parsing_and_retries(fake_server):
    _, url = fake_server
    gen = OpenAICompatGenerator(
        url, "m", top_logprobs=2, prompt_template=lambda s: f"<u>{s}<a>", backoff=0.01
    )
    _Fake.failures = 2  # one 503 then one 429, then success
    [p] = gen.sample("hi", 1, 5, seed=1)
    assert len(_Fake.payloads) == 3
    body = _Fake.payloads[-1]
    assert body["prompt"] == "<u>hi<a>"
    assert body["logprobs"] == 2
    assert body["max_tokens"] == 5
    np.testing.assert_allclose(p.token_logprobs, [-0.5, -0.25])
    np.testing.assert_allclose(p.topk_logprobs, [[-0.5, -1.5], [-0.25, -2.0]])
    assert p.finished
    assert p.text == " 7"
    pre = p.truncate(1)
    pre.finished = False
    [g] = gen.continue_("hi", [pre], 9)
    assert _Fake.payloads[-1]["prompt"] == "<u>hi<a> "
    assert _Fake.payloads[-1]["max_tokens"] == 8
    assert g.n_tokens == 3
    assert g.text == "  7"


def test_openai_gives_up_after_retries(fake_server):
    _, url = fake_server
    _Fake.failures = 10
    gen = OpenAICompatGenerator(url, "m", max_retries=1, backoff=0.01)
    with pytest.raises(RuntimeError, match="HTTP"):
        gen.sample("hi", 1, 5)
