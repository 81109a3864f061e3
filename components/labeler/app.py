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

STOP_GRACE_SECONDS = 2.0
"""How long a SIGTERM waits for the loop's current step; well inside the pod's 10 s grace period."""


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
    idler = Idler(
        heartbeat,
        stop.wait,
        HEARTBEAT_PERIOD_SECONDS,
        stop.is_set,
        on_error=lambda error: log_event(
            logger, logging.ERROR, "heartbeat_failed", error=f"{type(error).__name__}: {error}"
        ),
    )
    labeler = Labeler(
        node_name=settings.node_name,
        nodes=nodes,
        ec2_for_region=aws.ec2_client,
        logger=logger,
        idle=idler.idle,
        interval_seconds=settings.interval_seconds,
        default_region=settings.region,
    )
    log_event(logger, logging.INFO, "started", node=settings.node_name, intervalSeconds=settings.interval_seconds)
    # The loop runs in a daemon thread so that SIGTERM is acted on at once, not after an API call
    # blocked in a socket read (up to the 30 s read timeout) returns: the main thread only waits for
    # the signal, gives the loop a moment to finish its step, then exits (the thread dies with it).
    worker = threading.Thread(target=labeler.run, kwargs={"stopped": stop.is_set}, name="labeler", daemon=True)
    worker.start()
    while worker.is_alive() and not stop.wait(1.0):
        pass
    worker.join(STOP_GRACE_SECONDS)
    log_event(logger, logging.INFO, "stopped", node=settings.node_name, loopFinished=not worker.is_alive())
    return 0
