"""An HTTP proxy that counts the bytes each request sends and each response returns,
by method and object path: put between a client (gcsfs, s3fs) and a storage emulator,
it measures what a build uploads and downloads, object by object, without touching
the client or the server. Used by the tests and benchmarks of finalizing."""
from __future__ import annotations

import http.client
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade",
        "content-length", "expect"}  # the proxy holds the body before it forwards


class Exchange(NamedTuple):
    method: str
    path: str  # the URL's path, percent-decoded (object names appear as written)
    query: str
    sent: int  # request body bytes
    received: int  # response body bytes


class CountingProxy:
    """`with CountingProxy(upstream_port) as proxy:` point the client at proxy.url;
    proxy.exchanges lists every request, in the order they completed."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1"):
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # the emulators log already
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _forward(self):
                body = self._body()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                headers["Content-Length"] = str(len(body))
                upstream = http.client.HTTPConnection(upstream_host, upstream_port, timeout=120)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    self.send_response_only(response.status, response.reason)
                    for key, value in response.getheaders():
                        if key.lower() == "location":  # a resumable upload's next URL
                            value = value.replace(f"{upstream_host}:{upstream_port}",
                                                  owner.url.split("://", 1)[1])
                        if key.lower() not in _HOP:
                            self.send_header(key, value)
                    length = response.getheader("Content-Length") if self.command == "HEAD" \
                        else None  # a HEAD's says what a GET would return
                    self.send_header("Content-Length", length or str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()
                url = urllib.parse.urlsplit(self.path)
                with owner._lock:
                    owner.exchanges.append(Exchange(self.command, urllib.parse.unquote(url.path),
                                                    url.query, len(body), len(data)))

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _forward

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that drops a kept-alive connection is no news

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def mark(self) -> int:
        """The number of exchanges so far: `since(mark)` lists the ones after it."""
        with self._lock:
            return len(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges[mark:])


def totals(exchanges, contains: str = "") -> tuple[int, int]:
    """(bytes sent, bytes received) of the exchanges whose path or query holds
    `contains` (all of them for "")."""
    chosen = [e for e in exchanges if contains in e.path or contains in
              urllib.parse.unquote(e.query)]
    return sum(e.sent for e in chosen), sum(e.received for e in chosen)
