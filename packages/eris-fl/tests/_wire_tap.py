"""A TCP proxy on 127.0.0.1 that forwards to a target and keeps every byte it forwarded."""

from __future__ import annotations

import contextlib
import socket
import threading


class WireTap:
    """Listen on a free loopback port, forward each connection to ``target_port``.

    ``streams()`` returns, per connection and direction, the bytes forwarded, concatenated
    in order: what a relay on that path sees on the wire.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._streams: list[bytearray] = []
        self._lock = threading.Lock()
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                up, down = bytearray(), bytearray()
                self._streams += [up, down]
                self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, up), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, down), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bytearray) -> None:
        try:
            while chunk := src.recv(65536):
                with self._lock:
                    record += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def streams(self) -> list[bytes]:
        with self._lock:
            return [bytes(s) for s in self._streams]

    def close(self) -> None:
        self._closed = True
        self._server.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()
