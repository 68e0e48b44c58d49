"""A minimal OpenAI-compatible ``/v1/completions`` server over any :class:`Generator`.

Meant for tests and local experiments (stdlib ``http.server`` in a thread, loopback only).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["serve_completions"]


def serve_completions(
    generator: Any, host: str = "127.0.0.1", port: int = 0, with_logprobs: bool = True
) -> tuple[ThreadingHTTPServer, str]:
    """Start a completions server in a daemon thread.

    Args:
        generator: the back-end that answers requests (``sample`` with the request's prompt).
        host: bind address (loopback by default).
        port: 0 picks a free port.
        with_logprobs: include ``logprobs`` in the answers (False simulates a server that drops
            them).

    Returns:
        ``(server, base_url)``; call ``server.shutdown()`` then ``server.server_close()`` to stop.
    """

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # silence the default stderr log
            pass

        def do_POST(self) -> None:
            if not self.path.endswith("/completions"):
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            paths = generator.sample(
                body["prompt"],
                int(body.get("n", 1)),
                int(body.get("max_tokens", 16)),
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                seed=body.get("seed"),
            )
            k = int(body.get("logprobs") or 0)
            choices = []
            for i, p in enumerate(paths):
                c: dict[str, Any] = {
                    "index": i,
                    "text": p.text,
                    "finish_reason": "stop" if p.finished else "length",
                }
                if with_logprobs and k:
                    tops = p.topk_logprobs if p.topk_logprobs is not None else None
                    texts = p.token_texts or [""] * p.n_tokens
                    c["logprobs"] = {
                        "tokens": texts,
                        "token_logprobs": p.token_logprobs.tolist(),
                        "top_logprobs": None
                        if tops is None
                        else [{f"<{j}>": float(v) for j, v in enumerate(row[:k])} for row in tops],
                    }
                else:
                    c["logprobs"] = None
                choices.append(c)
            data = json.dumps({"object": "text_completion", "choices": choices}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, f"http://{host}:{server.server_address[1]}/v1"
