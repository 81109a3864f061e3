"""What the Kubernetes client hands back for a call made with ``_preload_content=False``, for
fakes of its API classes: the answer's body, read to its end, and its connection released."""

from __future__ import annotations

import json
from typing import Any


class RawAnswer:
    def __init__(self, body: Any = None):
        self.data = json.dumps(body if body is not None else {}).encode()
        self.released = False

    def read(self) -> bytes:
        return self.data

    def release_conn(self) -> None:
        self.released = True


def listed(items: list[Any]) -> RawAnswer:
    """A list call's answer."""
    return RawAnswer({"items": items})
