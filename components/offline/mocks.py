"""``PlausibleMocks``: the engine answers a test run gets, outputs a real deployment would give back.

Derived from the inputs: ARNs in the test account, EC2-shaped IDs, generated names with a fixed
suffix, an ``eks.Cluster``'s kubeconfig and its ``eksCluster`` as a resource reference, and answers
for the provider functions the components call. Tests (through ``tests/support/harness.py``) and the local
cluster use them; a render uses ``render.registrations.PlaceholderMocks``, which invents nothing.

A stack reference reads another stack's outputs, which no mock can derive: both answer one from the
``StackOutputs`` they are given for that stack, and leave any other unanswered.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import pulumi

from ..aws.cluster_access import CREATOR_TAG

ACCOUNT_ID = "123456789012"
"""The account ID ``PlausibleMocks`` puts in ARNs (tests only; a render never invents one)."""

CALLER_ARN = f"arn:aws:iam::{ACCOUNT_ID}:user/test"
"""The principal ``PlausibleMocks`` runs `pulumi up` as."""


def _arn(service: str, kind: str, name: str) -> str:
    return f"arn:aws:{service}:us-west-2:{ACCOUNT_ID}:{kind}/{name}"


EC2_ID_PREFIXES = {
    "aws:ec2/securityGroup:SecurityGroup": "sg-",
    "aws:ec2/subnet:Subnet": "subnet-",
    "aws:ec2/vpc:Vpc": "vpc-",
}
"""Resource types whose mock IDs take EC2's shape (``<prefix><17 hex digits>``)."""

_RESOURCE_REFERENCE = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e"}
"""The SDK's marker of a serialized resource reference (``rpc._special_sig_key``: ``_special_resource_sig``)."""


STACK_REFERENCE = "pulumi:pulumi:StackReference"
"""The type of ``pulumi.StackReference``: read (not created) by the stack's name, its ``name`` input."""


@dataclass(frozen=True)
class StackOutputs:
    """Another stack's outputs as the engine hands them to a stack reference of it."""

    outputs: Mapping[str, Any]
    """Its outputs by name."""
    secret_names: frozenset[str] = frozenset()
    """Those of its outputs that are secrets (the reference's ``secretOutputNames``)."""

    def answer(self) -> dict[str, Any]:
        """The reference's outputs: ``outputs`` and ``secretOutputNames``."""
        return {"outputs": dict(self.outputs), "secretOutputNames": sorted(self.secret_names)}


def stack_reference_answer(args: pulumi.runtime.MockResourceArgs, stacks: Mapping[str, StackOutputs]) -> Optional[dict[str, Any]]:
    """The outputs of a stack reference to one of ``stacks``; None for another resource or stack."""
    if args.typ != STACK_REFERENCE:
        return None
    found = stacks.get(str(args.inputs.get("name")))
    return {**args.inputs, **found.answer()} if found is not None else None


class PlausibleMocks(pulumi.runtime.Mocks):
    """Outputs a real deployment would give back, derived from the inputs; a stack reference reads
    the outputs ``stacks`` gives for its stack (a test says what that stack holds)."""

    def __init__(self, stacks: Optional[Mapping[str, StackOutputs]] = None) -> None:
        self.references: dict[str, tuple[str, dict[str, Any]]] = {}
        """Resources that outputs refer to (urn: id and state), for the SDK to read back by URN."""
        self.stacks = dict(stacks or {})
        """Other stacks' outputs by stack name, for the stack references to them."""

    def _reference(self, urn: str, resource_id: str, state: dict[str, Any]) -> dict[str, Any]:
        """An output that is a resource reference, as pulumi-eks gives ``eksCluster``: the SDK turns it
        into a resource object whose outputs it reads with ``getResource`` (answered from ``state``)."""
        self.references[urn] = (resource_id, state)
        return {**_RESOURCE_REFERENCE, "urn": urn, "id": resource_id}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):  # noqa: C901 - one branch per mocked resource type: a flat table of what AWS would compute
        outputs = dict(args.inputs)
        name = args.name
        typ = args.typ
        referenced = stack_reference_answer(args, self.stacks)
        if referenced is not None:
            return args.resource_id or name, referenced
        if typ == "eks:index:Cluster":
            # pulumi-eks names an unnamed cluster after the resource, with a random suffix.
            cluster_name = outputs.get("name") or f"{name}-eksCluster-{hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()[:7]}"
            kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": cluster_name}]}
            outputs.update(
                kubeconfig=kubeconfig,
                kubeconfigJson=json.dumps(kubeconfig),
                # pulumi-eks hands out the group it was given, else the one EKS created
                # (nodejs/eks/cluster/cluster.ts, clusterSecurityGroupId).
                clusterSecurityGroupId=outputs.get("clusterSecurityGroup") or "sg-0c1a55e7c1a55e7c1",
                nodeSecurityGroupId="sg-0d0d0d0d0d0d0d0d0",
                eksCluster=self._reference(
                    f"urn:pulumi:mock::mock::eks:index:Cluster$aws:eks/cluster:Cluster::{name}-eksCluster",
                    cluster_name,
                    {
                        "name": cluster_name,
                        "arn": _arn("eks", "cluster", cluster_name),
                        # pulumi-eks leaves the version to EKS, which picks its default.
                        "version": outputs.get("version") or "1.34",
                        # The group EKS creates for the cluster, on its control plane and nodes.
                        "vpcConfig": {"vpcId": outputs.get("vpcId"), "clusterSecurityGroupId": "sg-0c1a55e7c1a55e7c1"},
                    },
                ),
                core={
                    "endpoint": "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
                    "vpcId": outputs.get("vpcId"),
                    "subnetIds": outputs.get("subnetIds") or [],
                },
            )
        elif typ == "aws:eks/nodeGroup:NodeGroup":
            # EKS completes a name prefix with a unique suffix (a timestamp, as the provider does).
            outputs.setdefault("nodeGroupName", f"{outputs.get('nodeGroupNamePrefix', '')}20261130000000000000000001")
        elif typ == "aws:iam/role:Role":
            outputs.setdefault("name", f"{name}-1a2b3c")
            outputs["arn"] = f"arn:aws:iam::{ACCOUNT_ID}:role/{outputs['name']}"
        elif typ == "aws:sqs/queue:Queue":
            outputs.setdefault("name", f"{name}-4d5e6f")
            region = outputs.get("region", "us-west-2")
            outputs["arn"] = f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{outputs['name']}"
            outputs["url"] = f"https://sqs.{region}.amazonaws.com/{ACCOUNT_ID}/{outputs['name']}"
        elif typ in ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"):
            # An unnamed bucket gets a generated name, like an IAM role.
            outputs.setdefault("bucket", f"{name}-7g8h9i")
        elif typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            # FSx generates the mount name (8 letters and digits) and the DNS name of a new file system.
            outputs.setdefault("mountName", "abcdef12")
            outputs.setdefault("dnsName", f"{name}.fsx.{outputs.get('region', 'us-west-2')}.amazonaws.com")
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            outputs.update(latestVersion=1, defaultVersion=1)
        elif typ == "aws:ecr/repository:Repository":
            repository = outputs.get("name", name)
            outputs.update(
                registryId=ACCOUNT_ID,
                repositoryUrl=f"{ACCOUNT_ID}.dkr.ecr.{outputs.get('region', 'us-west-2')}.amazonaws.com/{repository}",
                arn=_arn("ecr", "repository", repository),
            )
        elif typ == "docker-build:index:Image":
            digest = "sha256:" + hashlib.sha256(json.dumps(outputs, sort_keys=True, default=str).encode()).hexdigest()
            tag = (outputs.get("tags") or [""])[0]
            outputs.update(digest=digest, ref=f"{tag}@{digest}", contextHash="0" * 64)
        elif typ == "tls:index/privateKey:PrivateKey":
            # Key-shaped stand-ins (tests only): the provider generates the real pair at deployment.
            outputs.update(
                privateKeyOpenssh="-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----\n",
                publicKeyOpenssh=f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAImock {name}\n",
            )
        elif typ.startswith("aws:"):
            service = typ.split(":")[1].split("/")[0]
            outputs.setdefault("arn", _arn(service, typ.rsplit(":", 1)[-1].lower(), name))
        if typ.startswith("kubernetes:"):
            metadata = outputs.get("metadata") or {}
            resource_id = "/".join(p for p in (metadata.get("namespace"), metadata.get("name") or name) if p)
        elif typ in EC2_ID_PREFIXES:
            # EC2-shaped, since CRD patterns (EC2NodeClass selector ids) check them.
            resource_id = EC2_ID_PREFIXES[typ] + hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()[:17]
        else:
            resource_id = args.resource_id or f"{name}-id"
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "aws:eks/getCluster:getCluster":
            cluster_name = args.args["name"]
            return {
                "name": cluster_name,
                "id": cluster_name,
                "arn": _arn("eks", "cluster", cluster_name),
                "endpoint": "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
                "certificateAuthorities": [{"data": "LS0tLS1CRUdJTi1DRVJUSUZJQ0FURS0tLS0t"}],
                "vpcConfig": {
                    "clusterSecurityGroupId": "sg-0e0e0e0e0e0e0e0e0",
                    "vpcId": "vpc-0123456789abcdef0",
                    "subnetIds": [],
                },
                "version": "1.34",
                "accessConfigs": [{"authenticationMode": "API_AND_CONFIG_MAP"}],
                "roleArn": f"arn:aws:iam::{ACCOUNT_ID}:role/{cluster_name}-cluster",
                # A cluster this library created, by the principal getCallerIdentity answers with.
                "tags": {CREATOR_TAG: CALLER_ARN},
            }
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": CALLER_ARN, "userId": "AIDATEST"}
        if args.token == "aws:iam/getSessionContext:getSessionContext":
            # STS names an assumed-role session arn:aws:sts::<account>:assumed-role/<role>/<session>;
            # the issuer is the role. Any other principal is its own issuer.
            arn = args.args["arn"]
            match = re.match(r"^arn:([^:]+):sts::(\d{12}):assumed-role/([^/]+)/(.+)$", arn)
            if match is None:
                return {"arn": arn, "issuerArn": arn, "id": arn}
            partition, account, role, session = match.groups()
            return {
                "arn": arn,
                "issuerArn": f"arn:{partition}:iam::{account}:role/{role}",
                "issuerName": role,
                "sessionName": session,
                "id": arn,
            }
        if args.token == "aws:eks/getClusters:getClusters":
            # No cluster exists yet: every program runs as its first deployment unless a test says otherwise.
            return {"names": [], "id": "us-west-2"}
        if args.token in ("aws:index/getRegion:getRegion",):
            return {"name": "us-west-2", "region": "us-west-2", "id": "us-west-2"}
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {
                "id": "us-west-2",
                "userName": "AWS",
                "password": "mock-ecr-password",
                "authorizationToken": "QVdTOm1vY2stZWNyLXBhc3N3b3Jk",
                "proxyEndpoint": f"https://{ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com",
                "expiresAt": "2030-01-01T00:00:00Z",
            }
        if args.token == "aws:ec2/getSubnet:getSubnet":
            # A /20 of 10.0.0.0/8 picked by the subnet ID's last hex digits (tests only: a render
            # marks it as unknown instead), so each adopted subnet gets a block of its own.
            subnet = args.args["id"]
            block = int(subnet[-3:], 16) % 4096
            return {"id": subnet, "cidrBlock": f"10.{block // 16}.{(block % 16) * 16}.0/20"}
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
        if args.token == "aws:eks/getAddonVersion:getAddonVersion":
            # A version of the shape EKS returns; for the node monitoring agent, the build its 1.7.0
            # chart ships (nodeAgent.image.tag). Tests only: a render marks it as unknown instead.
            addon = args.args["addonName"]
            version = "v1.7.0-eksbuild.1" if addon == "eks-node-monitoring-agent" else "v1.0.0-eksbuild.1"
            return {
                "addonName": addon,
                "kubernetesVersion": args.args["kubernetesVersion"],
                "mostRecent": args.args.get("mostRecent", False),
                "version": version,
                "id": addon,
            }
        return {}
