"""A stand-in for the Hugging Face hub on 127.0.0.1, a thread in the test: the tree listing with each file's LFS
sha256 and size, and the file itself behind a redirect (``/{repo}/resolve/main/{file}`` -> ``/cdn/{file}``),
with HTTP ranges; it can cut the connection half-way once and advertise a wrong sha256, and it records the
ranges asked for. Point ``HF_ENDPOINT`` at :attr:`HubServer.endpoint`."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class HubServer:
    repo: str
    file: Path
    cut_once: bool = False  # the first transfer of the file stops half-way and the connection closes
    wrong_sha256: bool = False
    ranges: list[str | None] = field(default_factory=list)  # each file request's Range header (None: none)
    _server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def sha256(self) -> str:
        digest = hashlib.sha256(self.file.read_bytes()).hexdigest()
        return digest[::-1] if self.wrong_sha256 else digest

    def tree(self) -> list[dict[str, Any]]:
        size = self.file.stat().st_size
        readme = {"type": "file", "path": "README.md", "size": 10, "oid": "0" * 40}
        lfs = {"oid": self.sha256(), "size": size}
        return [readme, {"type": "file", "path": self.file.name, "size": size, "lfs": lfs}]

    def __enter__(self) -> HubServer:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == f"/api/models/{hub.repo}/tree/main":
                    self._send(200, json.dumps(hub.tree()).encode(), "application/json")
                elif self.path == f"/{hub.repo}/resolve/main/{hub.file.name}":
                    self.send_response(302)
                    self.send_header("Location", f"/cdn/{hub.file.name}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == f"/cdn/{hub.file.name}":
                    self._file()
                else:
                    self._send(404, b"not found", "text/plain")

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self) -> None:
                data = hub.file.read_bytes()
                asked = self.headers.get("Range")
                hub.ranges.append(asked)
                start = int(asked.removeprefix("bytes=").rstrip("-")) if asked else 0
                self.send_response(206 if asked else 200)
                if asked:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if hub.cut_once:
                    hub.cut_once = False
                    self.wfile.write(data[start : start + (len(data) - start) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="hub-server", daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
