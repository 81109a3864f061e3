"""Test doubles for the topology labeler: a Kubernetes API server on 127.0.0.1 that the real
``kubernetes`` client talks to, and a botocore-stubbed EC2 client.

The API server keeps Nodes in memory, records every request (method, path, content type, body),
answers GET and PATCH of a Node like the real API server does for a label patch (labels merged,
``resourceVersion`` bumped, 409 Conflict when the patch carries a stale ``resourceVersion``), and can
be told to fail the next requests with a given status.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any, Optional

import boto3
from botocore.stub import Stubber
from kubernetes import client
from tests.support.json_handler import JsonHandler

NODE_NAME = "ip-10-0-1-23.us-west-2.compute.internal"
INSTANCE_ID = "i-0123456789abcdef0"
PROVIDER_ID = f"aws:///us-west-2b/{INSTANCE_ID}"
NETWORK_NODES_3 = ["nn-1111111111111111a", "nn-2222222222222222b", "nn-3333333333333333c"]
NETWORK_NODES_4 = [*NETWORK_NODES_3, "nn-4444444444444444d"]


def node_object(
    labels: Optional[dict[str, str]] = None,
    provider_id: Optional[str] = PROVIDER_ID,
    resource_version: str = "4711",
    name: str = NODE_NAME,
) -> dict[str, Any]:
    """A Node as the API server returns it."""
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": resource_version,
            "labels": {
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "role": "gpu-training",
                **(labels or {}),
            },
        },
        "spec": {},
    }
    if provider_id is not None:
        node["spec"]["providerID"] = provider_id
    return node


@dataclass
class RecordedRequest:
    method: str
    path: str
    content_type: Optional[str]
    body: Any


class FakeApiServer:
    """A minimal Kubernetes API server for ``/api/v1/nodes/<name>`` on an ephemeral loopback port."""

    def __init__(self, *nodes: dict[str, Any]):
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self.requests: list[RecordedRequest] = []
        self.failures: list[int] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(JsonHandler):

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with fake._lock:
                    fake.requests.append(RecordedRequest(self.command, self.path, self.headers.get("Content-Type"), body))
                    status, payload = fake._respond(self.command, self.path, body)
                self.answer(status, payload)

            do_GET = do_PATCH = do_PUT = do_POST = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FakeApiServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def core_v1(self) -> client.CoreV1Api:
        """The real client, pointed at this server (no proxy: the server is on loopback)."""
        configuration = client.Configuration(host=self.url, proxy=None, no_proxy="*")
        return client.CoreV1Api(client.ApiClient(configuration))

    @staticmethod
    def _status(code: int, reason: str, message: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message, "reason": reason, "code": code}

    def _respond(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        if self.failures:
            code = self.failures.pop(0)
            return code, self._status(code, "Injected", f"injected failure {code}")
        prefix = "/api/v1/nodes/"
        name = path.split("?", 1)[0][len(prefix):] if path.startswith(prefix) else None
        if name not in self.nodes:
            return 404, self._status(404, "NotFound", f'nodes "{name}" not found')
        node = self.nodes[name]
        if method == "GET":
            return 200, copy.deepcopy(node)
        if method == "PATCH":
            metadata = (body or {}).get("metadata", {})
            expected = metadata.get("resourceVersion")
            if expected is not None and expected != node["metadata"]["resourceVersion"]:
                return 409, self._status(409, "Conflict", "the object has been modified")
            node["metadata"]["labels"].update(metadata.get("labels", {}))
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
            return 200, copy.deepcopy(node)
        return 405, self._status(405, "MethodNotAllowed", method)

    def patches(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "PATCH"]


def stubbed_ec2(region: str = "us-west-2"):
    """A real EC2 client whose calls are answered by a ``Stubber`` (requests validated against the
    EC2 model); no credentials or network are used."""
    ec2 = boto3.client(
        "ec2", region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    return ec2, Stubber(ec2)


def topology_response(network_nodes: list[str], instance_type: str = "p5.48xlarge") -> dict[str, Any]:
    """A ``DescribeInstanceTopology`` response for ``INSTANCE_ID``."""
    return {
        "Instances": [
            {
                "InstanceId": INSTANCE_ID,
                "InstanceType": instance_type,
                "GroupName": "gpu-training-prod-p5-training",
                "NetworkNodes": network_nodes,
                "AvailabilityZone": "us-west-2b",
                "ZoneId": "usw2-az2",
            }
        ]
    }
