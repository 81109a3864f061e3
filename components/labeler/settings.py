"""What the DaemonSet and the program agree on: environment variable names, defaults and the
heartbeat that the liveness probe checks. Standard library only, so the Pulumi side imports it
without the program's dependencies and the liveness probe starts quickly."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

ENV_NODE_NAME = "NODE_NAME"
"""The node this pod runs on, from the downward API (``spec.nodeName``)."""
ENV_INTERVAL = "LABELER_INTERVAL_SECONDS"
"""Seconds between re-checks of the node."""
ENV_HEARTBEAT_FILE = "LABELER_HEARTBEAT_FILE"
"""Path of the liveness heartbeat file."""
ENV_REGION = "AWS_REGION"
"""The cluster's region, for a node whose provider id names no zone (and no region label yet)."""

DEFAULT_INTERVAL_SECONDS = 600
"""Re-check every ten minutes: after the first answer from EC2 a re-check is one GET of the node,
which also puts back a topology label someone removed."""

HEARTBEAT_DIR = "/run/labeler"
"""Where the DaemonSet mounts a small writable emptyDir (the root filesystem is read-only)."""
HEARTBEAT_FILE = f"{HEARTBEAT_DIR}/heartbeat"
"""The heartbeat file."""
HEARTBEAT_PERIOD_SECONDS = 15.0
"""How often the labeler touches the heartbeat file, also while it idles or backs off."""
MAX_HEARTBEAT_AGE_SECONDS = 180
"""Age after which the labeler counts as stuck: longer than one heartbeat period plus the slowest
pair of calls it makes (Kubernetes 5+30 s, EC2 three attempts of 5+20 s)."""


class SettingsError(ValueError):
    """The environment does not say what the labeler needs."""


@dataclass(frozen=True)
class Settings:
    """The program's settings, read from its environment."""

    node_name: str
    interval_seconds: float
    heartbeat_file: str
    region: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "Settings":
        node_name = environ.get(ENV_NODE_NAME, "").strip()
        if not node_name:
            raise SettingsError(f"{ENV_NODE_NAME} is not set (the DaemonSet sets it from spec.nodeName)")
        raw_interval = environ.get(ENV_INTERVAL, str(DEFAULT_INTERVAL_SECONDS))
        try:
            interval = float(raw_interval)
        except ValueError:
            raise SettingsError(f"{ENV_INTERVAL}={raw_interval!r} is not a number of seconds") from None
        if not math.isfinite(interval) or interval <= 0:
            # NaN would make every wait end at once (a busy loop against the API server).
            raise SettingsError(f"{ENV_INTERVAL} must be a positive, finite number of seconds, not {raw_interval}")
        return cls(
            node_name, interval, environ.get(ENV_HEARTBEAT_FILE, HEARTBEAT_FILE), environ.get(ENV_REGION, "").strip()
        )
