"""The import rules of docs/architecture.md, checked over the AST of every module.

Every ``import`` and ``from ... import`` counts, also inside functions (a lazy import is
still a dependency). A rule names a group of modules and the modules it must not import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("backends", "gateway", "loadtests")

#: The layers, from the top: a module may import its own layer and the layers below it,
#: never one above (docs/architecture.md draws them).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("gateway.commands",),
    ("gateway.http",),
    ("gateway.app", "gateway.dashboard"),
    ("gateway.components", "gateway.config"),
    ("gateway.s3api", "gateway.auth", "gateway.qos"),
    ("gateway.service",),
    ("gateway.cache", "gateway.versioning", "gateway.lifecycle", "gateway.cluster",
     "gateway.cost"),
    ("gateway.protocol", "gateway.client", "gateway.background", "gateway.metrics"),
    ("backends.posix", "backends.blobseer_like", "backends.s3", "backends.registry",
     "backends.direct_io", "backends.files", "backends.locks", "backends.metajson",
     "backends.multipart", "backends.oserrors", "backends.throttle", "backends.throttled"),
    ("backends.core",),
)
#: Clients of the gateway (the FUSE mount, the load tests) speak to it over HTTP: they
#: import only these, besides themselves.
CLIENT_ALLOWED = ("backends.core", "gateway.protocol", "gateway.client", "gateway.cluster.client",
                  "gateway.cluster.ring")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str, modules: set[str]) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # ``from pkg import mod`` imports the module pkg.mod, ``from mod import name``
            # the module mod
            submodules = [f"{target}.{alias.name}" for alias in node.names]
            found = [name for name in submodules if name in modules]
            yield from found or [target]


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for package in PACKAGES
             for path in sorted((ROOT / package).rglob("*.py"))}
    modules = set(paths)
    # only our own modules count: third-party imports are not layers
    return {m: {t for t in _imports(path, m, modules) if t in modules}
            for m, path in paths.items()}


GRAPH = _graph()


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _violations(sources: str, forbidden: str) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in GRAPH.items() if _within(m, sources)
                  for t in targets if _within(t, forbidden))


def _package(module: str) -> str:
    """The unit of the layer rules: ``gateway.<package or module>``, ``backends.<...>``,
    ``loadtests``."""
    parts = module.split(".")
    return parts[0] if parts[0] == "loadtests" else ".".join(parts[:2])


def _layer(module: str) -> int | None:
    for depth, layer in enumerate(LAYERS):
        if any(_within(module, prefix) for prefix in layer):
            return depth
    return None


def test_the_graph_sees_every_package() -> None:
    assert "backends.core.base" in GRAPH and "gateway.app" in GRAPH and "loadtests.units" in GRAPH
    assert "backends.core.base" in GRAPH["backends.core.streams"]  # imports are resolved


def test_every_module_has_a_layer() -> None:
    found = sorted(m for m in GRAPH if _layer(m) is None
                   and not _within(m, "gateway.fuse_mount") and not _within(m, "loadtests")
                   and m not in ("gateway", "backends"))
    assert found == []


def test_no_layer_imports_a_layer_above_it() -> None:
    found = []
    for module, targets in GRAPH.items():
        here = _layer(module)
        if here is None:
            continue
        found += [f"{module} imports {t}" for t in targets
                  if (there := _layer(t)) is not None and there < here]
    assert sorted(found) == []


def test_no_package_loop() -> None:
    """No two packages import each other, directly or around a circle."""
    edges: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        edges.setdefault(_package(module), set()).update(
            _package(t) for t in targets if _package(t) != _package(module))
    loops = []
    for start, first in edges.items():  # a package that reaches itself again is on a loop
        seen: set[str] = set()
        todo = list(first)
        while todo:
            node = todo.pop()
            if node == start:
                loops.append(start)
                break
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
    assert sorted(loops) == []


@pytest.mark.parametrize(("sources", "forbidden"), [
    ("backends", "gateway"),
    ("backends", "loadtests"),
    ("gateway", "loadtests"),
])
def test_the_product_never_imports_its_load_tests(sources: str, forbidden: str) -> None:
    assert _violations(sources, forbidden) == []


@pytest.mark.parametrize("client", ["gateway.fuse_mount", "loadtests"])
def test_clients_import_only_the_core_and_client_helpers(client: str) -> None:
    found = []
    for module, targets in GRAPH.items():
        if not _within(module, client) or _within(module, "loadtests.bench"):
            continue  # benchmark drivers embed and drive the gateway itself
        found += [f"{module} imports {t}" for t in targets
                  if not _within(t, client) and not any(_within(t, a) for a in CLIENT_ALLOWED)]
    assert sorted(found) == []
