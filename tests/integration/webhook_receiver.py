"""A real HTTP receiver for webhooks on 127.0.0.1: it records every request and can be told
to fail the first K with 500, to redirect, to answer a huge body, or to hang."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    requests: list[Received] = field(default_factory=list)
    fail_first: int = 0  # answer 500 to this many requests first
    mode: str = "ok"  # ok, redirect, huge, hang
    release: threading.Event = field(default_factory=threading.Event)  # ends a hang
    server_names: list[str | None] = field(default_factory=list)  # TLS SNI, per handshake


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            receiver.requests.append(Received(self.path, dict(self.headers.items()), body))
            if receiver.mode == "hang":
                receiver.release.wait(10)
                return
            if receiver.fail_first > 0:
                receiver.fail_first -= 1
                self._answer(500, b"down")
            elif receiver.mode == "redirect":
                self.send_response(302)
                self.send_header("Location", receiver.url + "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif receiver.mode == "huge":
                self._answer(200, b"x" * 5_000_000)
            else:
                self._answer(204, b"")

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)  # the sender may stop reading: it should

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

    return Handler


@contextmanager
def running_receiver(
    host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
) -> Iterator[Receiver]:
    """A receiver on ``host`` (any loopback address) and ``port`` (0: a free one); over
    HTTPS with ``tls``, recording the name each client asked for (SNI)."""
    receiver = Receiver(url="")
    server = ThreadingHTTPServer((host, port), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://{host}:{server.server_address[1]}"
    if tls is not None:
        tls.sni_callback = lambda _socket, name, _context: receiver.server_names.append(name)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        receiver.url = receiver.url.replace("http:", "https:", 1)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
