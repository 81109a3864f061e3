"""The labeler's loop: check the node, add what is missing, then idle; back off on errors.

Everything with a side effect (the Kubernetes API, the EC2 client factory, sleeping, randomness) is
passed in, so tests drive the loop with a stubbed EC2 client, a local API server and no real sleep.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

from . import aws, kube
from .logs import log_event
from .topology import (
    INSTANCE_TYPE_LABEL,
    REGION_LABEL,
    InstanceLocation,
    differing_labels,
    invalid_layers,
    missing_labels,
    parse_provider_id,
)


class Outcome(Enum):
    """The result of one check of the node."""

    LABELLED = "labelled"
    """Missing labels were added with one patch."""
    COMPLETE = "complete"
    """Every topology label EC2 knows of is already on the node; nothing was sent."""
    NO_TOPOLOGY = "no_topology"
    """EC2 has no topology for the instance (type not supported); nothing to label."""
    NOT_EC2 = "not_ec2"
    """The node is not an EC2 instance (hybrid node, unknown provider id); nothing to label."""
    STOPPED = "stopped"
    """SIGTERM arrived during the check; the patch it would have sent was not sent."""


class NodeNotReady(Exception):
    """The Node has no provider id yet; retried with backoff."""


@dataclass
class Backoff:
    """Exponential backoff with a cap and jitter: the ceiling doubles from ``base`` up to ``cap``
    with each consecutive failure, and the delay is drawn between half the ceiling and the ceiling,
    so the pods of a large pool do not retry in step."""

    base: float = 2.0
    cap: float = 300.0
    jitter: Callable[[float, float], float] = random.uniform
    failures: int = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.base * 2 ** min(self.failures, 32))
        self.failures += 1
        return self.jitter(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0


@dataclass
class Heartbeat:
    """The file whose age the liveness probe checks."""

    path: Path

    def beat(self) -> None:
        self.path.touch()


@dataclass
class Idler:
    """Waits between checks in steps of at most ``period`` seconds, touching the heartbeat at each
    step, and returns early once ``stopped`` says so (SIGTERM). A heartbeat that cannot be touched
    (its volume gone) is reported through ``on_error`` and the wait goes on: the liveness probe,
    which reads the same file, then restarts the pod, instead of a traceback ending it at once."""

    heartbeat: Heartbeat
    sleep: Callable[[float], Any]
    period: float
    stopped: Callable[[], bool] = lambda: False
    on_error: Callable[[Exception], None] = lambda error: None

    def _beat(self) -> None:
        try:
            self.heartbeat.beat()
        except Exception as error:  # noqa: BLE001 - reported; the probe acts on a stale heartbeat
            self.on_error(error)

    def idle(self, seconds: float) -> None:
        # A wait that is not a positive finite number (NaN never compares > 0) is one period, so
        # no value makes the loop spin.
        remaining = seconds if math.isfinite(seconds) and seconds > 0 else self.period
        while remaining > 0 and not self.stopped():
            self._beat()
            step = min(remaining, self.period)
            self.sleep(step)
            remaining -= step
        self._beat()


@dataclass
class Labeler:
    """Keeps one node's topology labels filled in."""

    node_name: str
    nodes: Any
    """A ``kubernetes.client.CoreV1Api``."""
    ec2_for_region: Callable[[str], Any]
    """Makes the EC2 client for a region (``aws.ec2_client``; a stubbed client in tests)."""
    logger: logging.Logger
    idle: Callable[[float], None]
    interval_seconds: float
    backoff: Backoff = field(default_factory=Backoff)
    default_region: str = ""
    """The cluster's region, for a node whose provider id names no zone and that has no region label."""
    stopped: Callable[[], bool] = lambda: False
    """SIGTERM: a check that notices it sends no patch."""
    _ec2_clients: dict = field(default_factory=dict, init=False, repr=False)
    _topology: Optional[tuple[str, aws.InstanceTopology]] = field(default=None, init=False, repr=False)
    _last_outcome: Optional[Outcome] = field(default=None, init=False, repr=False)
    _reported_differences: set = field(default_factory=set, init=False, repr=False)
    _reported_invalid: set = field(default_factory=set, init=False, repr=False)

    def _log(self, level: int, event: str, **fields: Any) -> None:
        log_event(self.logger, level, event, node=self.node_name, **fields)

    def _topology_of(self, location: InstanceLocation, region: str) -> Optional[aws.InstanceTopology]:
        # A running instance does not move, so one answer from EC2 serves every later check: the
        # slow re-checks only read the Node. "No topology" is not cached, since EC2's data can lag
        # behind a fresh launch.
        if self._topology is not None and self._topology[0] == location.instance_id:
            return self._topology[1]
        if region not in self._ec2_clients:
            self._ec2_clients[region] = self.ec2_for_region(region)
        topology = aws.describe_topology(self._ec2_clients[region], location.instance_id)
        if topology is not None:
            self._topology = (location.instance_id, topology)
        return topology

    def _settled(self, outcome: Outcome, level: int, **fields: Any) -> Outcome:
        """Report a steady state once, when the node enters it, not at every re-check."""
        if outcome is not self._last_outcome:
            self._log(level, outcome.value, **fields)
        self._last_outcome = outcome
        return outcome

    def check(self) -> Outcome:
        """One pass: read the node, learn its topology, add the missing labels."""
        node = kube.read_node(self.nodes, self.node_name)
        if not node.provider_id:
            raise NodeNotReady(f"node {self.node_name} has no spec.providerID yet")
        try:
            location = parse_provider_id(node.provider_id)
        except ValueError:
            return self._settled(Outcome.NOT_EC2, logging.WARNING, providerID=node.provider_id)
        # A provider id without a zone (aws:////i-...) is still an EC2 instance: its region comes
        # from the node's well-known region label, else from the cluster's region the pod is given.
        region = location.region or node.labels.get(REGION_LABEL) or self.default_region
        if not region:
            raise NodeNotReady(
                f"node {self.node_name}: provider id {node.provider_id!r} names no zone, and neither the "
                f"{REGION_LABEL} label nor AWS_REGION gives the region"
            )

        topology = self._topology_of(location, region)
        if topology is None:
            return self._settled(
                Outcome.NO_TOPOLOGY,
                logging.WARNING,
                instanceId=location.instance_id,
                instanceType=node.labels.get(INSTANCE_TYPE_LABEL),
                zone=location.zone,
                reason="EC2 DescribeInstanceTopology has no entry for this instance: its type has no "
                "topology data (or not yet); idling, re-checking every interval",
            )

        differences = differing_labels(topology.network_nodes, node.labels)
        if differences and frozenset(differences.items()) not in self._reported_differences:
            self._reported_differences.add(frozenset(differences.items()))
            self._log(
                logging.WARNING,
                "label_differs_from_ec2",
                labels={key: {"node": ours, "ec2": theirs} for key, (ours, theirs) in differences.items()},
                action="left unchanged",
            )

        invalid = invalid_layers(topology.network_nodes)
        if invalid and frozenset(invalid) not in self._reported_invalid:
            self._reported_invalid.add(frozenset(invalid))
            self._log(
                logging.WARNING,
                "invalid_label_value",
                labels={key: repr(value) for key, value in invalid.items()},
                action="left out; the other layers are written",
            )

        missing = missing_labels(topology.network_nodes, node.labels)
        if not missing:
            return self._settled(Outcome.COMPLETE, logging.INFO, layers=len(topology.network_nodes))
        if self.stopped():
            # SIGTERM arrived while EC2 or the API server answered: the pod is going away, and a
            # patch now could land after its replacement has read the node.
            return self._settled(Outcome.STOPPED, logging.INFO, pendingLabels=missing)
        kube.add_node_labels(self.nodes, node, missing)
        self._last_outcome = Outcome.LABELLED
        self._log(
            logging.INFO,
            "labels_added",
            labels=missing,
            instanceId=location.instance_id,
            instanceType=topology.instance_type,
        )
        return Outcome.LABELLED

    def _failed(self, error: Exception) -> float:
        delay = self.backoff.next_delay()
        throttled = aws.is_throttling(error) or kube.api_status(error) == 429
        transient = throttled or isinstance(error, NodeNotReady) or aws.is_transient(error) or kube.is_transient(error)
        self._log(
            logging.WARNING if transient else logging.ERROR,
            "throttled" if throttled else "retrying" if transient else "check_failed",
            error=f"{type(error).__name__}: {error}",
            retryInSeconds=round(delay, 1),
            consecutiveFailures=self.backoff.failures,
        )
        return delay

    def run(self, stopped: Callable[[], bool] = lambda: False, max_checks: Optional[int] = None) -> None:
        """Check, then idle for the interval (or the backoff delay after a failure), until stopped.
        No error ends the loop: a pod that crash-loops helps nobody, one that logs and retries does."""
        self.stopped = stopped
        checks = 0
        while not stopped() and (max_checks is None or checks < max_checks):
            checks += 1
            try:
                self.check()
            except Exception as error:  # noqa: BLE001 - every failure is logged and retried
                delay = self._failed(error)
            else:
                self.backoff.reset()
                delay = self.interval_seconds
            try:
                self.idle(delay)
            except Exception as error:  # noqa: BLE001 - never end the pod with a traceback
                self._log(logging.ERROR, "idle_failed", error=f"{type(error).__name__}: {error}")
                self._sleep_after_idle_failure(delay)

    def _sleep_after_idle_failure(self, seconds: float) -> None:
        """Wait without the idler, so a failing idle step cannot turn the loop into a busy loop."""
        limit = seconds if math.isfinite(seconds) and seconds > 0 else self.backoff.cap
        deadline = time.monotonic() + limit
        while not self.stopped() and time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def heartbeat_at(path: str) -> Heartbeat:
    """The heartbeat file, created now so the liveness probe passes from the first check on."""
    heartbeat = Heartbeat(Path(path))
    os.makedirs(heartbeat.path.parent, exist_ok=True)
    heartbeat.beat()
    return heartbeat
