"""Every refusal the package can make, read from its own source: the "Refused by" table of
``docs/configuration.md`` (``offline.docs`` writes it; a test fails when it is stale).

Each ``Problem(path, message)`` the package constructs is one refusal, and so is each call of a
problem sink (``problem(key, message)`` from ``_collector(path)`` or a ``ProblemSink`` parameter)
and of a helper that passes its own ``message`` parameter on to ``Problem``. The key path is the
path expression with its names followed where the source says what they hold: a local assignment,
the arguments every caller passes for a parameter (or its default), a module constant. What stays
unknown is a placeholder: ``[*]`` for an index, ``<key>`` (the expression) for anything else, so
``f"gpuNodeGroups[{i}]"`` reads ``gpuNodeGroups[*]`` and a component's ``f"GpuNodePool({name})"``
reads ``GpuNodePool(<name>)``. The rule is the enclosing function and the message with its
placeholders shown as ``…``. Pydantic's own refusals (types, enums, bounds, patterns, validators)
are in ``schema_refusals``; this module skips the function that translates them into problems.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

PACKAGE = Path(__file__).resolve().parent.parent
"""The package's own source folder (its modules ship with it)."""

SCHEMA_PLUMBING = {"problems_from_validation_error"}
"""Functions whose problems are pydantic's refusals, listed from the models by ``schema_refusals``."""

MAX_DEPTH = 6
"""How many callers deep a name is followed before it is shown as a placeholder."""

MAX_PATHS = 24
"""Key paths kept per refusal; more (a name every caller sets differently) would say little."""

Scope = Optional[ast.AST]
"""The function a node is in (None: module level)."""


@dataclass(frozen=True)
class Refusal:
    """One refusal: the key paths it names, its rule and the module it is made in."""

    paths: tuple[str, ...]
    rule: str
    module: str


class _Source:
    """The package's modules parsed, with what the resolution needs: each node's parent and module,
    every call by the name it calls, and the names lambdas are assigned to."""

    def __init__(self, root: Path):
        self.modules: dict[str, ast.Module] = {}
        self.parent: dict[ast.AST, ast.AST] = {}
        self.module_of: dict[ast.AST, str] = {}
        self.calls: dict[str, list[ast.Call]] = {}
        self.names: dict[ast.AST, str] = {}
        for file in sorted(root.rglob("*.py")):
            module = file.relative_to(root).as_posix()
            tree = ast.parse(file.read_text(), filename=module)
            self.modules[module] = tree
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    self.parent[child] = node
                self.module_of[node] = module
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and isinstance(node.targets[0], ast.Name):
                    self.names[node.value] = node.targets[0].id  # ``problem = lambda key, message: ...``
                elif isinstance(node, ast.Call) and _called_name(node):
                    self.calls.setdefault(_called_name(node), []).append(node)

    def name_of(self, function: ast.AST) -> Optional[str]:
        """A function's name, or the name a lambda is assigned to."""
        return getattr(function, "name", None) or self.names.get(function)

    def scope(self, node: ast.AST) -> Scope:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                return node
        return None

    def chain(self, scope: Scope) -> Iterator[ast.AST]:
        """The scope, the functions around it, then its module."""
        while scope is not None:
            yield scope
            scope = self.scope(scope)


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


_OWN_NODES: dict[ast.AST, list[ast.AST]] = {}
"""``_own_nodes`` of each function while ``source_refusals`` runs (names are looked up many times)."""


def _walk_own(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not those of functions defined inside it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    if function not in _OWN_NODES:
        _OWN_NODES[function] = list(_walk_own(function))
    return _OWN_NODES[function]


def _parameters(function: ast.AST) -> list[ast.arg]:
    args = function.args  # type: ignore[attr-defined]  # a def or lambda node; callers pass only those
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def _default(function: ast.AST, name: str) -> Optional[ast.expr]:
    args = function.args  # type: ignore[attr-defined]  # a def or lambda node; callers pass only those
    positional = [*args.posonlyargs, *args.args]
    for arg, default in zip(reversed(positional), reversed(args.defaults), strict=False):
        if arg.arg == name:
            return default
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if arg.arg == name:
            return default
    return None


def _argument(call: ast.Call, function: ast.AST, name: str) -> Optional[ast.expr]:
    """The expression ``call`` passes for ``function``'s parameter ``name``, if it passes one."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]  # type: ignore[attr-defined]  # a def or lambda node
    if positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    if name in positional and positional.index(name) < len(call.args):
        passed = call.args[positional.index(name)]
        return None if isinstance(passed, ast.Starred) else passed
    return None


def _placeholder(expr: ast.expr, in_brackets: bool) -> str:
    if in_brackets:
        return "*"
    text = ast.unparse(expr)
    return "<Args class>" if text.startswith("type(") and text.endswith(").__name__") else f"<{text}>"


class _Resolver:
    def __init__(self, source: _Source):
        self.source = source

    def paths(self, expr: ast.expr, scope: Scope, depth: int = 0, in_brackets: bool = False) -> set[str]:
        """The texts ``expr`` can be, its unknown parts as placeholders."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.JoinedStr):
            pieces: list[set[str]] = []
            text = ""
            for part in expr.values:
                if isinstance(part, ast.FormattedValue):
                    pieces.append(self.paths(part.value, scope, depth, in_brackets=text.endswith("[")))
                    text = ""
                else:
                    text = part.value  # type: ignore[attr-defined]  # an f-string's other parts are str Constants
                    pieces.append({text})
            return self._joined(pieces)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self._joined([self.paths(expr.left, scope, depth), self.paths(expr.right, scope, depth)])
        if isinstance(expr, ast.IfExp):
            if isinstance(expr.test, (ast.Constant, ast.JoinedStr)):  # a helper's ``key if key else ...`` given a key
                given = expr.test.value if isinstance(expr.test, ast.Constant) else expr.test.values
                return self.paths(expr.body if given else expr.orelse, scope, depth, in_brackets)
            return self.paths(expr.body, scope, depth, in_brackets) | self.paths(expr.orelse, scope, depth, in_brackets)
        if isinstance(expr, ast.Name):
            found = self.name(expr.id, scope, depth, getattr(expr, "lineno", 0))
            if found:
                return found
        return {_placeholder(expr, in_brackets)}

    @staticmethod
    def _joined(pieces: list[set[str]]) -> set[str]:
        # Sorted, so the first MAX_PATHS are the same in every process (a set's order follows the hash seed).
        joined = {"".join(p) for p in itertools.islice(itertools.product(*(sorted(piece) for piece in pieces)), MAX_PATHS)}
        return {p.replace(".[", "[") for p in joined}

    def name(self, name: str, scope: Scope, depth: int, line: int = 0) -> set[str]:
        """What the source says ``name`` holds in ``scope`` at ``line``: empty when it does not say."""
        if depth > MAX_DEPTH:
            return set()
        for function in self.source.chain(scope):
            bindings = sorted(
                (n for n in _own_nodes(function) if name in _bound_names(n)), key=lambda n: getattr(n, "lineno", 0)
            )
            before = [n for n in bindings if getattr(n, "lineno", 0) <= line]
            # The binding in force where the name is read; a loop variable is one of many values.
            for binding in before[-1:] or bindings:
                if not isinstance(binding, ast.Assign):
                    return set()
            if bindings:
                return set().union(*(self.paths(b.value, function, depth + 1) for b in before[-1:] or bindings))  # type: ignore[attr-defined]  # each binding is an ast.Assign, checked above
            if name in (a.arg for a in _parameters(function)):
                return self.parameter(function, name, depth)
        module = self.source.modules[self.source.module_of[scope]] if scope is not None else None
        for statement in module.body if module else ():
            if isinstance(statement, ast.Assign) and any(_is_name(t, name) for t in statement.targets):
                return self.paths(statement.value, None, depth + 1)
        return set()

    def parameter(self, function: ast.AST, name: str, depth: int) -> set[str]:
        """What the callers of ``function`` pass for its parameter ``name`` (or its default)."""
        found: set[str] = set()
        # A method's callers cannot be told from other classes' methods of that name by the source alone.
        method = isinstance(self.source.parent.get(function), ast.ClassDef)
        if method:
            return found
        omitted = not isinstance(function, ast.FunctionDef)
        if isinstance(function, ast.FunctionDef):
            calls = self.source.calls.get(function.name, [])
            for call in calls:
                passed = _argument(call, function, name)
                if passed is None:
                    omitted = True
                else:
                    found |= self.paths(passed, self.source.scope(call), depth + 1)
            omitted = omitted or not calls
        default = _default(function, name)
        if omitted and default is not None:
            found |= self.paths(default, self.source.scope(function), depth + 1)
        return found

    def sink_prefixes(self, name: str, scope: Scope, depth: int = 0) -> Optional[set[str]]:
        """The path a problem sink called ``name`` in ``scope`` puts keys under; None: no sink."""
        for function in self.source.chain(scope):
            for node in _own_nodes(function):
                if (
                    isinstance(node, ast.Assign)
                    and isinstance(node.value, ast.Call)
                    and _called_name(node.value) == "_collector"
                    and isinstance(node.targets[0], ast.Tuple)
                    and _is_name(node.targets[0].elts[1], name)
                ):
                    return self.paths(node.value.args[0], function, depth)
            sink = next((a for a in _parameters(function) if a.arg == name), None)
            if sink is not None:
                if sink.annotation is None or ast.unparse(sink.annotation) != "ProblemSink":
                    return None
                found: set[str] = set()
                for call in self.source.calls.get(getattr(function, "name", ""), []):
                    passed = _argument(call, function, name)
                    if isinstance(passed, ast.Name) and depth < MAX_DEPTH:
                        found |= self.sink_prefixes(passed.id, self.source.scope(call), depth + 1) or set()
                return found or {f"<{name}>"}
        return None


def _targets(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _bound_names(node: ast.AST) -> set[str]:
    """The names an assignment or a loop binds."""
    if isinstance(node, ast.Assign):
        return set().union(*(_targets(t) for t in node.targets))
    if isinstance(node, (ast.For, ast.comprehension)):
        return _targets(node.target)
    return set()


def _is_name(target: ast.expr, name: str) -> bool:
    return isinstance(target, ast.Name) and target.id == name


def message_text(expr: ast.expr, scope: Scope, module: Optional[ast.Module] = None, limit: int = 110) -> str:
    """A message as a reader meets it, each placeholder shown as ``…``; a name holding the message
    is read from its assignment in ``scope`` or among ``module``'s constants."""

    def text(node: ast.expr) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(text(v) if not isinstance(v, ast.FormattedValue) else "…" for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return text(node.left) + text(node.right)
        if isinstance(node, ast.IfExp):
            return text(node.body)
        if isinstance(node, ast.Name):
            assignments = [*(_walk_own(scope) if scope is not None else ()), *(module.body if module else ())]
            values = [n.value for n in assignments if isinstance(n, ast.Assign) and any(_is_name(t, node.id) for t in n.targets)]
            if values:
                return text(values[0])
        return "…"

    shown = " ".join(text(expr).split())
    return shown if len(shown) <= limit else shown[: limit - 1].rstrip() + "…"


def _forwarder(source: _Source, problem: ast.Call) -> Optional[ast.AST]:
    """The function whose ``message`` parameter this ``Problem(...)`` passes on, if it does."""
    scope = source.scope(problem)
    message = problem.args[1] if len(problem.args) > 1 else next((k.value for k in problem.keywords if k.arg == "message"), None)
    if scope is not None and isinstance(message, ast.Name) and message.id in (a.arg for a in _parameters(scope)):
        return scope
    return None


def _rule(function: Scope, message: str) -> str:
    name = getattr(function, "name", "<module>")
    return f"`{name}`: {message}"


def source_refusals(root: Path = PACKAGE) -> list[Refusal]:
    """Every refusal the package's source makes, one per ``Problem``, sink call or helper call."""
    try:
        return _source_refusals(_Source(root))
    finally:
        _OWN_NODES.clear()


def _source_refusals(source: _Source) -> list[Refusal]:
    resolver = _Resolver(source)
    found: dict[tuple[str, str], set[str]] = {}

    def add(paths: set[str], scope: Scope, message: ast.expr, node: ast.AST) -> None:
        module = source.module_of[node]
        key = (_rule(scope, message_text(message, scope, source.modules[module])), module)
        found.setdefault(key, set()).update(sorted(paths)[:MAX_PATHS])

    forwarders = {}
    for call in source.calls.get("Problem", []):
        if getattr(source.scope(call), "name", None) in SCHEMA_PLUMBING:
            continue
        forwarder = _forwarder(source, call)
        if forwarder is not None:
            forwarders[forwarder] = call
            continue
        add(resolver.paths(call.args[0], source.scope(call)), source.scope(call), call.args[1], call)
    for name, calls in source.calls.items():
        for call in calls:
            scope = source.scope(call)
            if isinstance(call.func, ast.Name) and len(call.args) >= 2:
                prefixes = resolver.sink_prefixes(name, scope)
                if prefixes is not None:
                    keys = resolver.paths(call.args[0], scope)
                    add({f"{p}.{k}".replace(".[", "[") for p in prefixes for k in keys}, scope, call.args[1], call)
                    continue
            for forwarder, problem in forwarders.items():
                if source.name_of(forwarder) != name or not _visible(source, forwarder, scope):
                    continue
                message_name = problem.args[1].id  # type: ignore[attr-defined]  # a forwarder's message argument is a Name, found so above
                passed = _argument(call, forwarder, message_name)
                if passed is None:
                    continue
                paths = _bound_paths(resolver, problem.args[0], forwarder, call)
                add(paths, scope, passed, call)
    return sorted((Refusal(tuple(sorted(paths, key=path_order)), rule, module) for (rule, module), paths in found.items()), key=refusal_order)


def path_order(path: str) -> tuple[bool, bool, str]:
    """Stack keys first, then a component's arguments (``GpuNodePool(<name>)....``), then paths
    that start with a placeholder."""
    return path.startswith("<"), path[:1].isupper(), path.lower()


def refusal_order(refusal: Refusal) -> tuple[tuple[bool, bool, str], str]:
    return path_order(refusal.paths[0]), refusal.rule


def _visible(source: _Source, function: ast.AST, scope: Scope) -> bool:
    """Whether a call in ``scope`` calls ``function``: a module-level function is called by its name
    anywhere, one defined inside another only from there; the ``problem`` a ``_collector`` returns
    is called through a sink, above."""
    outer = source.scope(function)
    if getattr(outer, "name", None) == "_collector":
        return False
    return outer is None or outer in set(source.chain(scope))


def _bound_paths(resolver: _Resolver, path: ast.expr, forwarder: ast.AST, call: ast.Call) -> set[str]:
    """``path`` (an expression over ``forwarder``'s parameters) with this call's arguments in them."""
    bound = {a.arg: _argument(call, forwarder, a.arg) for a in _parameters(forwarder)}
    caller = resolver.source.scope(call)

    def substitute(node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Name) and bound.get(node.id) is not None:
            return bound[node.id]  # type: ignore[return-value]  # not None: checked in the condition
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.expr):
                setattr(node, field, substitute(value))
            elif isinstance(value, list):
                setattr(node, field, [substitute(v) if isinstance(v, ast.expr) else v for v in value])
        return node

    copied = substitute(ast.parse(ast.unparse(path), mode="eval").body)
    unbound = {n.id for n in ast.walk(copied) if isinstance(n, ast.Name)} & {a.arg for a in _parameters(forwarder)}
    return resolver.paths(copied, caller if not unbound else forwarder)
