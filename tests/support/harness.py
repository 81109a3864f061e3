"""The mock-engine harness the tests use. It lives in ``eks_gpu_training.offline.engine`` (the render command
runs the same engine) and is re-exported here under the names the tests import."""

from pathlib import Path

from eks_gpu_training.offline.engine import *  # noqa: F403 - the engine's names are the harness's
from eks_gpu_training.offline.engine import __all__  # noqa: F401 - so the harness exports exactly those
from eks_gpu_training.offline.engine import Graph, run_program

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""This checkout: the project the tests run (the package itself knows no checkout)."""
REFERENCE = PROJECT_ROOT.parent / "shared" / "reference"
"""The upstream reference artefacts beside the project, the pinned charts among them (CI has them;
a user's clone does not)."""


def research_cluster(network, *, system_node_group: bool = True):
    """A created cluster ``research`` in us-west-2, for tests whose program composes the components
    itself (as another Pulumi program would) instead of using the platform."""
    from eks_gpu_training import EksCluster, EksClusterArgs
    from eks_gpu_training.config import ClusterConfig, SystemNodeGroupConfig

    return EksCluster(
        "c",
        EksClusterArgs(
            cluster=ClusterConfig(name="research", endpoint_public_access_cidrs=["192.0.2.0/24"]),
            network=network,
            system_node_group=SystemNodeGroupConfig(enabled=system_node_group),
            region="us-west-2",
            partition="aws",
        ),
    )


def page_examples(page: str, section: str) -> dict[str, str]:
    """The first ```python block under each ``### heading`` of ``## <section>`` of a Markdown page of
    the project (``"README.md"``, ``"docs/library.md"``), by heading, so tests run the examples exactly
    as the page prints them."""
    import re

    text = (PROJECT_ROOT / page).read_text()
    body = text[text.index(f"## {section}\n") :]
    body = body[: body.find("\n## ", 1) if "\n## " in body[1:] else len(body)]
    examples = {}
    for part in re.split(r"^### ", body, flags=re.M)[1:]:
        heading, text = part.split("\n", 1)
        block = re.search(r"```python\n(.*?)```", text, re.S)
        if block:
            examples[heading.strip()] = block.group(1)
    return examples


def run_example(code: str, name: str = "documentation example", **kwargs) -> Graph:
    """Run example code as a Pulumi program under mocks."""
    return run_program(lambda: exec(compile(code, name, "exec"), {"__name__": "__main__"}), **kwargs)  # noqa: S102 - the docs' own examples


def two_az_network():
    """An adopted VPC with one subnet in each of us-west-2a and us-west-2b, the network of the
    ``research`` cluster the component tests compose."""
    from eks_gpu_training.config import NetworkConfig, SubnetConfig

    return NetworkConfig(
        vpc_id="vpc-0123456789abcdef0",
        subnets=[
            SubnetConfig(id="subnet-0123456789abcdef0", availability_zone="us-west-2a"),
            SubnetConfig(id="subnet-0123456789abcdef1", availability_zone="us-west-2b"),
        ],
    )


def stand_in_ref(region: str = "us-west-2"):
    """A hand-built ``ClusterRef`` without a Kubernetes provider, for tests whose component refuses its
    other arguments before it would use the cluster."""
    from eks_gpu_training import ClusterRef

    return ClusterRef(
        name="research",
        region=region,
        partition="aws",
        vpc_id="vpc-0123456789abcdef0",
        kubernetes_version="1.34",
        cluster_security_group_id="sg-0123456789abcdef0",
        kubeconfig="{}",
        provider=None,  # type: ignore[arg-type]
    )


def refusal_text(error: BaseException | None) -> str:
    """What `pulumi up` shows of a refusal: a ``pulumi.RunError`` (``ConfigError`` is one), which
    Pulumi's Python language host shows as its message alone; anything else would reach the user
    as a traceback. ``tests/cluster/test_engine_in_cluster.py`` has the real language host show one."""
    import pulumi

    assert isinstance(error, pulumi.RunError), repr(error)
    return str(error)
