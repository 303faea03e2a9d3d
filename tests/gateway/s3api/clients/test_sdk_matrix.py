"""The AWS SDK for Go v2 and the AWS SDK for JavaScript v3, each running its program of the
common operations (tests/clients/go, tests/clients/js) with its default settings against a
real gateway, with the cache tier and without it (``--cache-size 0``).

The programs are built once (Go: ``go build`` of the pinned go.mod/go.sum into a cache
directory outside the checkout; JS: ``npm ci`` of the pinned package-lock.json into the
gitignored node_modules/) and skip, naming what is missing, where the toolchain is not
installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

ROOT = Path(__file__).resolve().parents[4]
GO_PROGRAM = ROOT / "tests" / "clients" / "go"
JS_PROGRAM = ROOT / "tests" / "clients" / "js"
#: where the Go program is built (outside the checkout)
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "squall-tests"
BUILD_TIMEOUT = 600.0
RUN_TIMEOUT = 180.0


def _tool(name: str, *fallbacks: str) -> str | None:
    found = shutil.which(name)
    if found is not None:
        return found
    return next((path for path in fallbacks if Path(path).is_file()), None)


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def go_program() -> Path:
    go = _tool("go", "/usr/local/go/bin/go")
    if go is None:
        pytest.skip("the Go toolchain (go) is not installed: the AWS SDK for Go v2 is not run")
    sources = sorted(GO_PROGRAM.glob("*.go")) + [GO_PROGRAM / "go.mod", GO_PROGRAM / "go.sum"]
    binary = CACHE / f"s3matrix-go-{_digest(*sources)}"
    if not binary.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        built = subprocess.run([go, "build", "-mod=readonly", "-o", str(binary), "."],
                               cwd=GO_PROGRAM, capture_output=True, text=True,
                               timeout=BUILD_TIMEOUT, check=False)
        assert built.returncode == 0, built.stderr
    return binary


@pytest.fixture(scope="module")
def js_program() -> Path:
    node, npm = _tool("node"), _tool("npm")
    if node is None or npm is None:
        pytest.skip("Node.js (node, npm) is not installed: the AWS SDK for JavaScript v3 is "
                    "not run")
    stamp = JS_PROGRAM / "node_modules" / ".squall-lock"
    lock = _digest(JS_PROGRAM / "package-lock.json")
    if not stamp.is_file() or stamp.read_text() != lock:
        installed = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_PROGRAM,
                                   capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                                   check=False)
        assert installed.returncode == 0, installed.stderr
        stamp.write_text(lock)
    return JS_PROGRAM / "matrix.mjs"


@pytest.fixture(scope="module", params=["cache", "no-cache"])
def sdk_gateway(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    """A gateway with its cache tier, and one without (every write goes to the backend)."""
    args = ["--min-part-size", str(5 * 1024 * 1024)]
    if request.param == "no-cache":
        args += ["--cache-size", "0"]
    server = SquallProcess(tmp_path_factory.mktemp("sdk") / "data", args).start(timeout=120)
    yield server
    assert server.stop() == 0, server.log()


def _run(argv: list[str], cwd: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cwd),
           "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
           "AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, check=False)
    assert done.returncode == 0 and "all checks passed" in done.stdout, \
        f"{done.stdout}\n{done.stderr[-3000:]}"


def test_aws_sdk_go_v2(go_program: Path, sdk_gateway: SquallProcess, tmp_path: Path) -> None:
    _run([str(go_program), "-endpoint", sdk_gateway.endpoint], tmp_path)


def test_aws_sdk_js_v3(js_program: Path, sdk_gateway: SquallProcess, tmp_path: Path) -> None:
    node = _tool("node")
    assert node is not None
    _run([node, str(js_program), sdk_gateway.endpoint], tmp_path)
