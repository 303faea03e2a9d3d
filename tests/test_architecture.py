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

#: The shared core: the modules of backends/ that every layer and client may import.
CORE = frozenset({
    "backends.base", "backends.blocking", "backends.checksums", "backends.conditions",
    "backends.errors", "backends.internal_keys", "backends.keys", "backends.numbers",
    "backends.regions", "backends.streams", "backends.unit_types", "backends.units",
    "backends.upload_checksums",
})
#: Client helpers: what a client needs of the gateway's own protocol (the cluster ring).
CLIENT_HELPERS = frozenset({"gateway.auth.client", "gateway.cluster.client", "gateway.cluster.ring",
                            "gateway.tls"})
#: Known exceptions to the client rule, each with the reason it stands.
CLIENT_EXCEPTIONS = {
    # The FUSE client maps S3 error codes to the same typed errors the gateway raises;
    # the protocol error classes still live in the S3 layer.
    ("gateway.fuse_mount.errors", "gateway.s3api.errors"),
}


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


def test_the_graph_sees_every_package() -> None:
    assert "backends.base" in GRAPH and "gateway.app" in GRAPH and "loadtests.units" in GRAPH
    assert "backends.base" in GRAPH["backends.streams"]  # imports are resolved


@pytest.mark.parametrize(("sources", "forbidden"), [
    ("backends", "gateway"),
    ("backends", "loadtests"),
    ("gateway", "loadtests"),
    ("gateway.cache", "gateway.s3api"),
    ("gateway.cluster.transport", "gateway.s3api"),
    ("gateway.cluster.wire", "gateway.s3api"),
])
def test_layers_do_not_import_upwards(sources: str, forbidden: str) -> None:
    assert _violations(sources, forbidden) == []


def test_the_shared_core_imports_only_the_shared_core() -> None:
    """The core stands alone: no backend implementation, nothing above it."""
    found = sorted(f"{m} imports {t}" for m in CORE for t in GRAPH[m] if t not in CORE)
    assert found == []


@pytest.mark.parametrize("client", ["gateway.fuse_mount", "loadtests"])
def test_clients_import_only_the_core_and_client_helpers(client: str) -> None:
    found = []
    for module, targets in GRAPH.items():
        if not _within(module, client) or _within(module, "loadtests.bench"):
            continue  # benchmark drivers embed and drive the gateway itself
        for target in targets:
            if (_within(target, client) or target in CORE or target in CLIENT_HELPERS
                    or (module, target) in CLIENT_EXCEPTIONS):
                continue
            found.append(f"{module} imports {target}")
    assert sorted(found) == []


def test_no_module_imports_the_cache_tiers_old_homes() -> None:
    """Units, streams and the throttle live in the shared core, once."""
    gone = {"gateway.cache.units", "gateway.cache.streams", "gateway.cache.throttle",
            "gateway.s3api.numbers"}
    assert not gone & set(GRAPH)
