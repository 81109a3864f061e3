"""The stack graph as a picture: components as nested boxes, dependencies as arrows.

One tree, two notations: Graphviz DOT (laid out by the ``dot`` program into SVG and PNG) and
Mermaid (rendered by GitHub and most Markdown viewers, so a README can show it). An arrow goes from
a resource to one that depends on it, in the order ``pulumi up`` creates them. Both texts are
generated in a fixed order, so an unchanged stack gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

from ...config import PROJECT
from .cache import RenderCache
from .registrations import Resource, StackRender

DOT_PROGRAM = "dot"
"""Graphviz's layout program (Debian package ``graphviz``)."""

PNG_DPI = 72
"""Pixels per inch of the PNG: Graphviz's point size, so 10 pt labels stay legible while a stack
with many pools still rasterises in well under a second (96 dpi takes twice as long)."""

SOURCE_HASH_PREFIX = "<!-- dot-source-sha256: "
"""Comment written into the SVG, so a committed picture can be checked against its source without
depending on the Graphviz version that laid it out."""

TITLE = (
    "{project} stack {stack}\n"
    "boxes: components around their children; arrows: creation order; "
    "a double border is a pulumi-eks component (its own children are made at deployment)"
)

_FILL = {
    "aws": "#ffe8cc",
    "eks": "#ffd8a8",
    "kubernetes": "#d0ebff",
    "helm": "#d3f9d8",
    "provider": "#e9ecef",
}
_CLUSTER_FILLS = ("#f8f9fa", "#ffffff")


@dataclass
class Box:
    """A resource in the picture, with the resources it contains."""

    resource: Resource
    index: int
    children: list["Box"] = field(default_factory=list)

    @property
    def is_group(self) -> bool:
        """Drawn as a box around its children (a component, or a resource with children)."""
        return bool(self.children)


def type_label(type_: str) -> str:
    """A short type name: ``aws:iam/role:Role`` -> ``aws.iam.Role``, ``eks:index:Cluster`` -> ``eks.Cluster``,
    this project's own components by their class name alone."""
    if type_.startswith("pulumi:providers:"):
        return f"provider {type_.rsplit(':', 1)[1]}"
    package, module, kind = (type_.split(":") + ["", ""])[:3]
    if package == PROJECT:
        return kind
    module = module.split("/")[0]
    return ".".join(p for p in (package, "" if module == "index" else module, kind) if p)


def _package(resource: Resource) -> str:
    if resource.type.startswith("pulumi:providers:"):
        return "provider"
    if resource.type.startswith("kubernetes:helm.sh/"):
        return "helm"
    return resource.type.split(":")[0]


def short_name(resource: Resource, ancestors: list[Resource]) -> str:
    """The name without the nearest ancestor's name prefix (children are named ``f"{name}-<role>"``)."""
    for ancestor in ancestors:
        if resource.name.startswith(ancestor.name + "-"):
            return resource.name[len(ancestor.name) + 1 :]
    return resource.name


def node_id(resource: Resource) -> str:
    """A node's identity in the picture: its URN without the stack and project (the SVG's titles)."""
    return resource.urn.split("::", 3)[-1].replace("pulumi:pulumi:Stack$", "", 1)


def build_tree(render: StackRender) -> list[Box]:
    """The top-level boxes of a render, each holding its children."""
    boxes = {r.urn: Box(r, i) for i, r in enumerate(render.resources)}
    roots = []
    for resource in render.resources:
        box = boxes[resource.urn]
        if resource.parent in boxes:
            boxes[resource.parent].children.append(box)
        else:
            roots.append(box)
    return roots


def _edges(render: StackRender) -> list[tuple[str, str]]:
    """(dependency URN, dependent URN) pairs between listed resources."""
    urns = {r.urn for r in render.resources}
    return sorted({(dep, r.urn) for r in render.resources for dep in r.dependencies if dep in urns})


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(render: StackRender) -> str:
    """The stack graph in Graphviz DOT."""
    lines = [
        "digraph stack {",
        f"  graph [rankdir=LR, compound=true, newrank=true, fontname=\"DejaVu Sans\", fontsize=12, labelloc=t, "
        f"label={_quote(TITLE.format(project=render.project, stack=render.stack))}];",
        '  node [shape=box, style="rounded,filled", fontname="DejaVu Sans", fontsize=10];',
        '  edge [color="#495057", arrowsize=0.7];',
    ]
    anchor: dict[str, tuple[str, Optional[str]]] = {}

    def emit(box: Box, ancestors: list[Resource], depth: int) -> Optional[str]:
        """Write a box; return the ID of a node inside it (edges to a group attach there)."""
        resource, indent = box.resource, "  " * (depth + 1)
        label = f"{short_name(resource, ancestors)}\n{type_label(resource.type)}"
        if not box.is_group:
            extra = ", peripheries=2" if resource.remote else ""
            lines.append(
                f"{indent}{_quote(node_id(resource))} [label={_quote(label)}, "
                f"fillcolor={_quote(_FILL.get(_package(resource), '#f1f3f5'))}{extra}];"
            )
            anchor[resource.urn] = (node_id(resource), None)
            return node_id(resource)
        cluster = "cluster_" + node_id(resource)
        lines.append(f"{indent}subgraph {_quote(cluster)} {{")
        heading = f"{type_label(resource.type)} {resource.name}"
        lines.append(
            f'{indent}  label={_quote(heading)}; style="rounded,filled"; color="#868e96"; '
            f"fillcolor={_quote(_CLUSTER_FILLS[depth % 2])};"
        )
        inner: Optional[str] = None
        if resource.custom:
            inner = node_id(resource)
            lines.append(
                f"{indent}  {_quote(inner)} [label={_quote(label)}, "
                f"fillcolor={_quote(_FILL.get(_package(resource), '#f1f3f5'))}];"
            )
        for child in box.children:
            child_node = emit(child, [resource, *ancestors], depth + 1)
            inner = inner or child_node
        lines.append(f"{indent}}}")
        anchor[resource.urn] = (inner or cluster, None if resource.custom else cluster)
        return inner

    for root in build_tree(render):
        emit(root, [], 0)
    for before, after in _edges(render):
        (tail, tail_cluster), (head, head_cluster) = anchor[before], anchor[after]
        attributes = []
        if tail_cluster:
            attributes.append(f"ltail={_quote(tail_cluster)}")
        if head_cluster:
            attributes.append(f"lhead={_quote(head_cluster)}")
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"  {_quote(tail)} -> {_quote(head)}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def to_mermaid(render: StackRender) -> str:
    """The stack graph as a Mermaid flowchart."""
    lines = ["flowchart LR"]
    ids: dict[str, str] = {}

    def emit(box: Box, ancestors: list[Resource], depth: int) -> None:
        resource, indent = box.resource, "  " * (depth + 1)
        label = "<br/>".join(_mermaid_text(part) for part in (short_name(resource, ancestors), type_label(resource.type)))
        if not box.is_group:
            ids[resource.urn] = f"n{box.index}"
            shape = ('[["', '"]]') if resource.remote else ('["', '"]')
            lines.append(f"{indent}n{box.index}{shape[0]}{label}{shape[1]}")
            return
        ids[resource.urn] = f"g{box.index}"
        heading = _mermaid_text(f"{type_label(resource.type)} {resource.name}")
        lines.append(f'{indent}subgraph g{box.index}["{heading}"]')
        if resource.custom:
            ids[resource.urn] = f"n{box.index}"
            lines.append(f'{indent}  n{box.index}["{label}"]')
        for child in box.children:
            emit(child, [resource, *ancestors], depth + 1)
        lines.append(f"{indent}end")

    for root in build_tree(render):
        emit(root, [], 0)
    for before, after in _edges(render):
        lines.append(f"  {ids[before]} --> {ids[after]}")
    return "\n".join(lines) + "\n"


def source_hash(dot_source: str) -> str:
    return hashlib.sha256(dot_source.encode()).hexdigest()


def svg_source_hash(svg: str) -> Optional[str]:
    """The DOT source hash a generated SVG carries, if any."""
    start = svg.find(SOURCE_HASH_PREFIX)
    if start < 0:
        return None
    start += len(SOURCE_HASH_PREFIX)
    return svg[start : svg.index(" ", start)]


class PictureError(RuntimeError):
    """Graphviz is missing or failed."""


@lru_cache(maxsize=4)
def graphviz_identity(program: str) -> str:
    """What identifies the Graphviz build at ``program``: ``dot -V`` and the resolved file's size and
    modification time (for the picture cache)."""
    version = subprocess.run([program, "-V"], capture_output=True, check=False)
    resolved = Path(program).resolve()
    stat = resolved.stat()
    return f"{version.stderr.decode(errors='replace').strip()} {resolved} {stat.st_size} {stat.st_mtime_ns}"


class Layout:
    """A ``dot`` run under way: it lays the picture out on another core while the render writes
    its files; ``finish`` waits for it and stamps the SVG. With a ``cache`` that holds the picture
    of this DOT text by this Graphviz, the files are copied from it instead."""

    def __init__(self, dot_source: str, svg_path: Path, png_path: Path, cache: Optional[RenderCache] = None):
        program = shutil.which(DOT_PROGRAM)
        if program is None:
            raise PictureError(
                f"Graphviz `{DOT_PROGRAM}` is not on PATH (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
            )
        self.dot_source, self.svg_path, self.png_path = dot_source, svg_path, png_path
        self.cache = cache
        self.key = cache.picture_key(dot_source, graphviz_identity(program), PNG_DPI) if cache is not None else None
        self.process: Optional[subprocess.Popen[bytes]] = None
        stored = cache.load_picture(self.key) if cache is not None and self.key is not None else None
        if stored is not None:
            svg_path.write_bytes(stored[0])
            png_path.write_bytes(stored[1])
            return
        self.process = subprocess.Popen(
            [program, f"-Gdpi={PNG_DPI}", "-Tsvg", "-o", str(svg_path), "-Tpng", "-o", str(png_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # The text is sent now (dot reads all of it before it lays anything out); its answer is read in finish.
        assert self.process.stdin is not None  # noqa: S101 - started with stdin=PIPE
        try:
            self.process.stdin.write(dot_source.encode())
        except BrokenPipeError:
            pass  # dot ended early; finish reports its error
        self.process.stdin.close()

    def finish(self) -> None:
        """Wait for ``dot``; raise ``PictureError`` with its message if it failed."""
        if self.process is None:
            return
        assert self.process.stderr is not None  # noqa: S101 - started with stderr=PIPE
        stderr = self.process.stderr.read()
        self.process.stderr.close()
        if self.process.wait() != 0:
            raise PictureError(f"`{DOT_PROGRAM}` failed: {stderr.decode(errors='replace').strip()}")
        svg = self.svg_path.read_text()
        header_end = svg.index("?>") + 2 if svg.startswith("<?xml") else 0
        stamp = f"\n{SOURCE_HASH_PREFIX}{source_hash(self.dot_source)} -->"
        self.svg_path.write_text(svg[:header_end] + stamp + svg[header_end:])
        if self.cache is not None and self.key is not None:
            self.cache.store_picture(self.key, self.svg_path.read_bytes(), self.png_path.read_bytes())

    def cancel(self) -> None:
        """Stop ``dot`` (the render failed before it could use the picture)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        assert self.process.stderr is not None  # noqa: S101 - started with stderr=PIPE
        self.process.stderr.close()
        self.process.wait()


def lay_out(dot_source: str, svg_path: Path, png_path: Path) -> None:
    """Lay the graph out with Graphviz into SVG (stamped with the source hash) and PNG."""
    Layout(dot_source, svg_path, png_path).finish()
