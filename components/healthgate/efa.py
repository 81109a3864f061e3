"""The EFA device count check, run in the check pod: the EFA device plugin mounts each device it
allocated into the container as ``/dev/infiniband/uverbs<N>``, so a pod given every device of its
node sees as many as the pool's instance type has. Standard library only."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

DEVICES = Path("/dev/infiniband")
TERMINATION_LOG = Path("/dev/termination-log")


def count(devices: Optional[Path] = None) -> int:
    folder = DEVICES if devices is None else devices
    return len(list(folder.glob("uverbs*"))) if folder.is_dir() else 0


def main(argv: Optional[list[str]] = None, environ: Optional[dict[str, str]] = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    expected = int(environ.get("EXPECTED_EFA_DEVICES", "0"))
    found = count()
    if found == expected:
        print(f"{found} EFA devices, as expected")
        return 0
    message = f"{found} EFA devices in the pod, {expected} expected"
    print(message, file=sys.stderr)
    try:
        TERMINATION_LOG.write_text(message)
    except OSError:
        pass  # FallbackToLogsOnError takes the message from the log instead
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
