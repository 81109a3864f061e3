"""The request handler the unit tests' stand-in API servers share: quiet, answering JSON."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Optional


class JsonHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing (test output stays quiet) and answers with a JSON body."""

    def log_message(self, *args: Any) -> None:
        pass

    def answer(self, status: int, body: Any, headers: Optional[dict[str, str]] = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
