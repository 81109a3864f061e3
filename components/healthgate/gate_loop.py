"""The gate's loop: read its settings and the cluster, decide (``decide.plan``), write, sleep.

In the cluster it runs as its Deployment's one pod with its ServiceAccount's token; beside a local
cluster it runs with a kubeconfig, impersonating that ServiceAccount (``--as``), so the same RBAC
and admission policy judge every write. A node's actions run in order and stop at the first the
API server refuses (a taint list changed since it was read), to be decided again next round.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from .decide import Action, plan
from .gate_api import Cluster, refusal
from .gate_settings import GateSettings, SettingsError

DEFAULT_INTERVAL_SECONDS = 5.0
"""Seconds between rounds: a joining node waits at most this long for its check to start."""
HEARTBEAT_FILE = "/run/health-gate/heartbeat"
"""Touched every round; the Deployment's liveness probe reads its age."""

log = logging.getLogger("health-gate")


def _client(kubeconfig: Optional[str], impersonate: Optional[str]) -> Any:
    from kubernetes import client, config

    if kubeconfig:
        api = config.new_client_from_config(config_file=kubeconfig)
    else:
        config.load_incluster_config()
        api = client.ApiClient()
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


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="health-gate", description="Admit GPU nodes to work only after their checks pass.")
    parser.add_argument("--namespace", required=True, help="the gate's namespace (its ConfigMap and check Jobs)")
    parser.add_argument("--config-map", required=True, help="the ConfigMap holding the gate's settings")
    parser.add_argument("--kubeconfig", default=None, help="a kubeconfig (default: the pod's own ServiceAccount)")
    parser.add_argument("--as", dest="impersonate", default=None, help="a user to impersonate (the gate's ServiceAccount)")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_SECONDS)
    parser.add_argument("--heartbeat-file", default=None, help=f"a file touched every round (in the cluster: {HEARTBEAT_FILE})")
    parser.add_argument("--once", action="store_true", help="one round, then exit")
    options = parser.parse_args(argv)
    if not options.interval > 0:
        parser.error("--interval must be a positive number of seconds")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    cluster = Cluster(_client(options.kubeconfig, options.impersonate), options.namespace)
    while not stopping:
        try:
            for line in run_round(cluster, options.config_map):
                log.info(line)
        except SettingsError as error:
            log.error("settings: %s", error)
        except Exception as error:  # noqa: BLE001 - the API server restarting or throttling: the next round tries again
            log.error("round failed: %s", error)
        if options.heartbeat_file:
            Path(options.heartbeat_file).touch()
        if options.once:
            break
        time.sleep(options.interval)
    return 0
