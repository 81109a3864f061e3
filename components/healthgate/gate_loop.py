"""The gate's loop: read its settings and the cluster, decide (``decide.plan``), write, and wait
for the next change of what it reads.

In the cluster it runs as its Deployment's one pod with its ServiceAccount's token; beside a local
cluster it runs with a kubeconfig, impersonating that ServiceAccount (``--as``), so the same RBAC
and admission policy judge every write. A node's actions run in order and stop at the first the
API server refuses (a taint list changed since it was read), to be decided again next round.

Rounds come at most every ``--interval`` seconds. After a round that did something (or failed), the
next comes after the interval; after one with nothing to do, only once a watch of what a round reads
(``Cluster.watches``: nodes, check Jobs and pods, the ConfigMap, and with Karpenter pools NodeClaims
and the gate's Events) says it changed, or ``IDLE_SECONDS`` passed. Every rule but one is decided by
what those objects hold; the one a clock decides, a pool's replacements per hour, waits at most that
long longer. Listing every node every 5 s was most of an idle cluster's API requests.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from .changes import Changes
from .decide import Action, plan
from .gate_api import Cluster, refusal
from .gate_settings import GateSettings, SettingsError

DEFAULT_INTERVAL_SECONDS = 5.0
"""Seconds between rounds at most: a joining node waits at most this long for its check to start."""
IDLE_SECONDS = 60.0
"""How long the gate waits for a change once a round had nothing to do, before it reads everything again."""
HEARTBEAT_FILE = "/run/health-gate/heartbeat"
"""Touched every round; the Deployment's liveness probe reads its age."""
HEARTBEAT_MAX_AGE_SECONDS = 120
"""The heartbeat's age at which the liveness probe fails: rounds come at least every ``IDLE_SECONDS``
and the interval, so only a gate stuck in a round (or not running rounds) is restarted."""

log = logging.getLogger("health-gate")


WATCHES = 6
"""The most watches the gate holds open at once (``Cluster.watches`` and ``karpenter_watches``)."""


def _client(kubeconfig: Optional[str], impersonate: Optional[str], connections: Optional[int] = None) -> Any:
    """A client of the API server, keeping up to ``connections`` connections open (default: the
    client's, five per CPU)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration, persist_config=False)
    else:
        config.load_incluster_config(client_configuration=configuration)
    if connections is not None:
        configuration.connection_pool_maxsize = connections
    api = client.ApiClient(configuration)
    if impersonate:
        api.set_default_header("Impersonate-User", impersonate)
    return api


WRITERS = 8
"""Nodes whose actions are written side by side: at a thousand joining nodes, one write after
another made a round take half a minute."""


def _apply_in_order(cluster: Cluster, actions: list[Action], settings: GateSettings, stamp: str) -> list[str]:
    """One node's actions in order, stopping at the first the API server refuses."""
    done = []
    for action in actions:
        try:
            cluster.apply(action, settings, stamp)
        except Exception as error:  # noqa: BLE001 - a refused write waits for the next round; anything else is logged and retried
            done.append(f"not done, {action}: {refusal(error) or error}")
            if getattr(action, "node", None) is not None:
                break
            continue
        done.append(str(action))
    return done


def run_round(cluster: Cluster, config_map: str) -> list[str]:
    """One round: every action taken, as a line of the log. Each node's actions run in order; the
    nodes' side by side (``WRITERS``); an action of no node (a check Job's deletion) on its own."""
    settings = cluster.settings(config_map)
    now = datetime.now(timezone.utc)
    actions = plan(cluster.nodes(), cluster.check_jobs(), cluster.check_pods(), cluster.nodeclaims(settings), settings, now,
                   cluster.replacements(settings))
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    groups: dict[Any, list[Action]] = {}
    for index, action in enumerate(actions):
        node = getattr(action, "node", None)
        groups.setdefault(("node", node) if node is not None else ("action", index), []).append(action)
    if len(groups) <= 1:
        return [line for group in groups.values() for line in _apply_in_order(cluster, group, settings, stamp)]
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        results = [pool.submit(_apply_in_order, cluster, group, settings, stamp) for group in groups.values()]
        return [line for result in results for line in result.result()]


def serve(cluster: Any, config_map: str, changes: Changes, stop: threading.Event, *,
          karpenter_watches: Callable[[], list[Callable[[], Any]]], interval: float, idle: float,
          heartbeat_file: Optional[str] = None, once: bool = False) -> None:
    """Rounds until ``stop`` is set: the next after ``interval`` when this one did something or
    failed, else once ``changes`` saw a change or ``idle`` seconds passed. ``karpenter_watches``
    are followed while the settings name a Karpenter pool: the ClusterRole allows them only then, and
    a watch the gate's RBAC no longer allows would be refused every ``REOPEN_MAX_SECONDS``."""
    following_karpenter: list[threading.Event] = []
    while not stop.is_set():
        started = time.monotonic()
        busy = True
        try:
            lines = run_round(cluster, config_map)
            for line in lines:
                log.info(line)
            busy = bool(lines)
        except SettingsError as error:
            log.error("settings: %s", error)
            busy = False  # a change of the ConfigMap wakes the gate
        except Exception as error:  # noqa: BLE001 - the API server restarting or throttling: the next round tries again
            log.error("round failed: %s", error)
        settings = cluster.last_settings
        if settings is not None and bool(settings.karpenter_pools) != bool(following_karpenter):
            for stopped in following_karpenter:
                stopped.set()
            following_karpenter = [changes.follow(open_watch) for open_watch in karpenter_watches()] if settings.karpenter_pools else []
        if heartbeat_file:
            Path(heartbeat_file).touch()
        if once:
            return
        stop.wait(max(0.0, interval - (time.monotonic() - started)))
        if not busy and not stop.is_set():
            changes.wait(idle)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="health-gate", description="Admit GPU nodes to work only after their checks pass.")
    parser.add_argument("--namespace", required=True, help="the gate's namespace (its ConfigMap and check Jobs)")
    parser.add_argument("--config-map", required=True, help="the ConfigMap holding the gate's settings")
    parser.add_argument("--kubeconfig", default=None, help="a kubeconfig (default: the pod's own ServiceAccount)")
    parser.add_argument("--as", dest="impersonate", default=None, help="a user to impersonate (the gate's ServiceAccount)")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_SECONDS,
                        help="seconds between rounds at most (default %(default)s)")
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS,
                        help="seconds a round with nothing to do waits for a change before the next (default %(default)s)")
    parser.add_argument("--heartbeat-file", default=None, help=f"a file touched every round (in the cluster: {HEARTBEAT_FILE})")
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    options = parser.parse_args(argv)
    if not options.interval > 0:
        parser.error("--interval must be a positive number of seconds")
    if not options.idle > 0:
        parser.error("--idle must be a positive number of seconds")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    cluster = Cluster(_client(options.kubeconfig, options.impersonate), options.namespace)
    # The watches on a client of their own: each holds a connection for as long as it is open, which
    # would leave the rounds' lists and writers too few in a shared pool.
    watching = Cluster(_client(options.kubeconfig, options.impersonate, connections=WATCHES), options.namespace)
    changes = Changes() if options.once else Changes(*watching.watches(options.config_map))
    stop = threading.Event()

    def stopping(*_: Any) -> None:
        stop.set()
        changes.wake()

    signal.signal(signal.SIGTERM, stopping)
    serve(cluster, options.config_map, changes, stop, karpenter_watches=watching.karpenter_watches, interval=options.interval,
          idle=options.idle, heartbeat_file=options.heartbeat_file, once=options.once)
    return 0
