"""Entry point: read the settings from the environment (the DaemonSet sets them), wire the real
clients into the loop, and stop cleanly on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Mapping, Optional

from . import aws, kube
from .logs import configure_logging, log_event
from .loop import Idler, Labeler, heartbeat_at
from .settings import HEARTBEAT_PERIOD_SECONDS, Settings, SettingsError


def main(environ: Optional[Mapping[str, str]] = None) -> int:
    logger = configure_logging()
    # What fails here is the pod's setup (environment, heartbeat volume, service account), which
    # no retry mends: say so in one JSON line and exit.
    try:
        settings = Settings.from_env(os.environ if environ is None else environ)
        heartbeat = heartbeat_at(settings.heartbeat_file)
        nodes = kube.in_cluster_api()
    except (SettingsError, OSError, kube.config.ConfigException) as error:
        log_event(logger, logging.ERROR, "cannot_start", error=f"{type(error).__name__}: {error}")
        return 2

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    idler = Idler(heartbeat, stop.wait, HEARTBEAT_PERIOD_SECONDS, stop.is_set)
    labeler = Labeler(
        node_name=settings.node_name,
        nodes=nodes,
        ec2_for_region=aws.ec2_client,
        logger=logger,
        idle=idler.idle,
        interval_seconds=settings.interval_seconds,
    )
    log_event(logger, logging.INFO, "started", node=settings.node_name, intervalSeconds=settings.interval_seconds)
    labeler.run(stopped=stop.is_set)
    log_event(logger, logging.INFO, "stopped", node=settings.node_name)
    return 0
