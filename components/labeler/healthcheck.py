"""Liveness check: ``python -m labeler.healthcheck`` exits 0 while the heartbeat file is fresh.

The labeler touches the file every ``HEARTBEAT_PERIOD_SECONDS``, also while it idles between
checks or backs off; a loop stuck in a call stops touching it and the kubelet restarts the pod. The
file lives on a small writable emptyDir, so the root filesystem stays read-only. Standard library
only: the probe starts a fresh interpreter each time and should be quick.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Optional

from .settings import HEARTBEAT_FILE, MAX_HEARTBEAT_AGE_SECONDS


def heartbeat_age(path: str, now: Callable[[], float] = time.time) -> Optional[float]:
    """Seconds since the heartbeat file was last touched; None when there is no file."""
    try:
        return now() - os.stat(path).st_mtime
    except FileNotFoundError:
        return None


def main(argv: Optional[list[str]] = None, now: Callable[[], float] = time.time) -> int:
    parser = argparse.ArgumentParser(description="Exit 0 while the labeler's heartbeat file is fresh.")
    parser.add_argument("--file", default=HEARTBEAT_FILE)
    parser.add_argument("--max-age", type=float, default=MAX_HEARTBEAT_AGE_SECONDS)
    options = parser.parse_args(argv)
    age = heartbeat_age(options.file, now)
    if age is None:
        print(f"no heartbeat file at {options.file}", file=sys.stderr)
        return 1
    if age > options.max_age:
        print(f"heartbeat is {age:.0f}s old (limit {options.max_age:.0f}s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
