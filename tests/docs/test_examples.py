"""The shell (and Python) examples of README.md and docs/, run as written on loopback.

Every fenced ``sh``/``python`` block is either run here (its text taken from the document,
only the port 900K made a free port, and placeholders such as ``<printed access key>``
filled in) or listed in ``NOT_RUN`` with the reason. A new example fails
``test_every_example_is_run_or_explained`` until it is one or the other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import make_client
from tests.support.etcd import etcd_available
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(sh|bash|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: Examples run by the tests below: (document, start of the example's first line).
RUN = {
    ("README.md", "export AWS_ACCESS_KEY_ID=<printed access key>"),
    ("README.md", "SQUALL_ACCESS_KEY=$AWS_ACCESS_KEY_ID"),
    ("README.md", "URL=$(aws --endpoint-url http://127.0.0.1:9000 s3 presign"),
    ("README.md", "import boto3"),
    ("README.md", "post = s3.generate_presigned_post("),
    ("README.md", "squall mount http://127.0.0.1:9000 checkpoints"),
    ("cluster.md", "export SQUALL_CLUSTER_SECRET="),
    ("cache.md", "squall serve --cache-mode elastic"),
    ("fuse-mount.md", "aws --endpoint-url http://127.0.0.1:9000 s3api put-bucket-lifecycle"),
}
#: Examples not run here, with the reason.
NOT_RUN = {
    ("README.md", "python3 -m venv .venv"): "installs from the network; the serve part "
                                            "is tests/gateway/commands/test_cli.py's default start",
    ("README.md", "./scripts/test.sh"): "the test suite itself",
    ("README.md", "SQUALL_TEST_WORKERS=2 ./scripts/test.sh"): "the test suite itself",
    ("fuse-mount.md", "export SQUALL_ACCESS_KEY=..."): "root-owned /mnt and /var/log paths; "
                                                      "README's mount example runs the same",
    ("cache.md", "settings = CacheSettings("): "a fragment of an API description",
    ("cache.md", "class Provisioner(Protocol)"): "an interface description",
    ("cluster.md", "from gateway.cluster.client import"): "tests/gateway/cluster routing",
    ("cluster.md", "python -m loadtests.bench.cluster --hosts"):
        "a benchmark run (root, cgroups); tests/loadtests runs the driver briefly",
    ("kubernetes.md", "docker build"): "needs Docker and a registry; tests/helm",
    ("kubernetes.md", "# one pod, posix backend"): "needs Kubernetes; tests/helm",
    ("kubernetes.md", "helm upgrade squall helm/squall --reuse-values"):
        "needs Kubernetes; tests/helm renders it, test_membership_changes_e2e.py adds members",
}
#: Whole documents of benchmark and load-test runs (minutes each, other machines,
#: tools installed from the network): tests/loadtests runs their drivers briefly.
NOT_RUN_DOCS = {"benchmarks.md": "benchmark runs", "loadtests.md": "load-test runs",
                "blobseer-like.md": "a benchmark run"}


def examples(path: Path) -> Iterator[tuple[str, str]]:
    """(first line, whole text) of every fenced sh/bash/python block of ``path``."""
    for match in _FENCE.finditer(path.read_text()):
        text = match.group(2)
        yield text.splitlines()[0].strip(), text


def example(name: str, start: str) -> str:
    """The one example of document ``name`` whose first line starts with ``start``."""
    path = ROOT / name if name == "README.md" else ROOT / "docs" / name
    found = [text for line, text in examples(path) if line.startswith(start)]
    assert len(found) == 1, f"{name}: {len(found)} examples start with {start!r}"
    return found[0]


def _listed(name: str, first: str, table: Iterable[tuple[str, str]]) -> bool:
    return any(doc == name and first.startswith(start) for doc, start in table)


def localize(text: str, base: int) -> str:
    """Ports 9000, 9001, ... of the example become ``base``, ``base + 1``, ..."""
    return re.sub(r"\b900(\d)\b", lambda m: str(base + int(m.group(1))), text)


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + count > 65535:
            continue
        held = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError("no consecutive free ports")


def shell_env(**extra: str) -> dict[str, str]:
    """This environment with the checkout's ``squall`` and ``aws`` first on PATH and no
    SQUALL_*/AWS_* settings of the caller."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SQUALL_", "AWS_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def wait_healthy(ports: list[int], proc: subprocess.Popen[bytes], log: Path,
                 timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(ports)
    while waiting and time.monotonic() < deadline:
        if proc.poll() is not None and proc.returncode != 0:
            raise AssertionError(f"example exited {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{waiting[0]}/_squall/health",
                         timeout=1).status_code == 200:
                waiting.pop(0)
                continue
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    assert not waiting, f"not healthy: {waiting}\n{log.read_text()}"


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the example's process group (its background gateways), then wait."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # the group of the shell started here
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(10)


def test_every_example_is_run_or_explained() -> None:
    unlisted = [(path.name, first) for path in DOCS if path.name not in NOT_RUN_DOCS
                for first, _ in examples(path)
                if not _listed(path.name, first, RUN) and not _listed(path.name, first,
                                                                       NOT_RUN)]
    assert not unlisted, f"examples neither run by a test nor listed in NOT_RUN: {unlisted}"
    for name, first in RUN:
        example(name, first)  # still in the document


def test_cluster_example_runs_as_written(tmp_path: Path) -> None:
    """docs/cluster.md's etcd and three members: they start, share keys, and every member
    serves every key (writes through each, reads through each)."""
    if etcd_available() is not None:
        pytest.skip(str(etcd_available()))
    base, etcd = free_ports(3), free_ports(2)
    script = localize(example("cluster.md", "export SQUALL_CLUSTER_SECRET="), base)
    script = script.replace(":2379", f":{etcd}").replace(":2380", f":{etcd + 1}")
    script += "\nenv | grep '^SQUALL_' > settings.env\nwait\n"
    log = tmp_path / "cluster.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=shell_env(),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ports = [base, base + 1, base + 2]
        wait_healthy(ports, proc, log)
        env = dict(line.split("=", 1) for line in
                   (tmp_path / "settings.env").read_text().splitlines())
        clients = [_client(f"http://127.0.0.1:{p}", env["SQUALL_ACCESS_KEY"],
                           env["SQUALL_SECRET_KEY"]) for p in ports]
        clients[0].create_bucket(Bucket="shared")
        for k, s3 in enumerate(clients):
            for n in range(2):
                s3.put_object(Bucket="shared", Key=f"via-{k}/{n}", Body=f"{k}.{n}".encode())
        for s3 in clients:
            for k in range(3):
                for n in range(2):
                    got = s3.get_object(Bucket="shared", Key=f"via-{k}/{n}")["Body"].read()
                    assert got == f"{k}.{n}".encode()
        text = log.read_text()
        for port in ports:
            assert f"cluster: member http://127.0.0.1:{port}, coordinated by etcd://" \
                in text
        assert env["SQUALL_SECRET_KEY"] not in text
    finally:
        stop_group(proc)


def _client(endpoint: str, access: str, secret: str):  # type: ignore[no-untyped-def]
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access,
                        aws_secret_access_key=secret, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path / "data").start()
    yield server
    assert server.stop() == 0, server.log()


def _fill(text: str, port: int) -> str:
    return localize(text, port).replace("<printed access key>", ACCESS_KEY) \
        .replace("<printed secret key>", SECRET_KEY)


def test_readme_using_it_sync_and_presign(gateway: SquallProcess, tmp_path: Path) -> None:
    """README: the aws CLI upload, `squall sync`, `aws s3 presign` + curl, boto3's
    presigned GET and PUT URLs."""
    work = tmp_path / "work"
    work.mkdir()
    state = os.urandom(300_000)
    (work / "state.h5").write_bytes(state)
    result = subprocess.run(["bash", "-c", _ordered_readme_script(gateway.port)], cwd=work,
                            env=shell_env(), capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "flushed:" in result.stdout and "everything dirty is on the backend" in \
        result.stdout
    assert (work / "state-copy.h5").read_bytes() == state
    code = _fill(example("README.md", "import boto3"), gateway.port)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False,
                            env=shell_env(AWS_ACCESS_KEY_ID=ACCESS_KEY,
                                          AWS_SECRET_ACCESS_KEY=SECRET_KEY))
    assert result.returncode == 0, result.stderr
    get_url, put_url = result.stdout.split()
    assert httpx.get(get_url).content == state
    assert httpx.put(put_url, content=b"uploaded").status_code == 200
    s3 = make_client(gateway.endpoint)
    body = s3.get_object(Bucket="checkpoints", Key="run-1/upload.bin")["Body"].read()
    assert body == b"uploaded"
    # The browser upload: the presigned POST's form, sent as a page would send it.
    post_code = code + "\n" + example("README.md", "post = s3.generate_presigned_post(") + \
        "\nimport json\nprint(json.dumps(post))\n"
    result = subprocess.run([sys.executable, "-c", post_code], capture_output=True, text=True,
                            timeout=60, check=False,
                            env=shell_env(AWS_ACCESS_KEY_ID=ACCESS_KEY,
                                          AWS_SECRET_ACCESS_KEY=SECRET_KEY))
    assert result.returncode == 0, result.stderr
    post = json.loads(result.stdout.splitlines()[-1])
    files = [*((name, (None, value)) for name, value in post["fields"].items()),
             ("file", ("page.txt", b"from a page", "text/plain"))]
    assert httpx.post(post["url"], files=files).status_code == 204
    body = s3.get_object(Bucket="checkpoints", Key="uploads/page.txt")["Body"].read()
    assert body == b"from a page"


RUN_README_SHELL = ("export AWS_ACCESS_KEY_ID=<printed access key>",
                    "SQUALL_ACCESS_KEY=$AWS_ACCESS_KEY_ID",
                    "URL=$(aws --endpoint-url http://127.0.0.1:9000 s3 presign")


def _ordered_readme_script(port: int) -> str:
    return "set -euo pipefail\n" + "\n".join(_fill(example("README.md", first), port)
                                             for first in RUN_README_SHELL)


@pytest.mark.skipif(not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"),
                    reason="needs /dev/fuse and fusermount3 (Debian's fuse3)")
def test_readme_mount(gateway: SquallProcess, tmp_path: Path) -> None:
    s3 = make_client(gateway.endpoint)
    s3.create_bucket(Bucket="checkpoints")
    mountpoint = tmp_path / "mnt" / "checkpoints"
    mountpoint.mkdir(parents=True)
    command = _fill(example("README.md", "squall mount http://127.0.0.1:9000 checkpoints"),
                    gateway.port)
    command = command.replace("/mnt/checkpoints", str(mountpoint))
    log = tmp_path / "mount.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], stdout=out,
                                stderr=subprocess.STDOUT,
                                env=shell_env(AWS_ACCESS_KEY_ID=ACCESS_KEY,
                                              AWS_SECRET_ACCESS_KEY=SECRET_KEY))
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(mountpoint):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        (mountpoint / "state.h5").write_bytes(b"through the mount")
        (mountpoint / "run-2").mkdir()
        assert sorted(os.listdir(mountpoint)) == ["run-2", "state.h5"]
        assert os.listdir(mountpoint / "run-2") == []  # the marker is no entry
        got = s3.get_object(Bucket="checkpoints", Key="state.h5")["Body"].read()
        assert got == b"through the mount"
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False, timeout=30)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_lifecycle_example(gateway: SquallProcess) -> None:
    s3 = make_client(gateway.endpoint)
    s3.create_bucket(Bucket="uploads")
    script = _fill(example("fuse-mount.md", "aws --endpoint-url http://127.0.0.1:9000 s3api "
                                            "put-bucket-lifecycle"),
                   gateway.port).replace("BUCKET", "uploads")
    result = subprocess.run(["bash", "-c", script], env=shell_env(
        AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_DEFAULT_REGION="us-east-1"), capture_output=True, text=True, timeout=60,
        check=False)
    assert result.returncode == 0, result.stderr
    rules = s3.get_bucket_lifecycle_configuration(Bucket="uploads")["Rules"]
    assert rules[0]["ID"] == "abort-crashed-uploads"


def test_elastic_serve_example(tmp_path: Path) -> None:
    """docs/cache.md's elastic gateway (on a free port: SQUALL_LISTEN, the command's
    default listen address being 127.0.0.1:9000)."""
    port = free_ports(1)
    command = example("cache.md", "squall serve --cache-mode elastic")
    log = tmp_path / "elastic.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=tmp_path, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env=shell_env(SQUALL_LISTEN=f"127.0.0.1:{port}",
                                              SQUALL_ACCESS_KEY=ACCESS_KEY,
                                              SQUALL_SECRET_KEY=SECRET_KEY,
                                              SQUALL_PUBLIC_STATUS="true"))
    try:
        wait_healthy([port], proc, log)
        status = httpx.get(f"http://127.0.0.1:{port}/_squall/status").json()
        assert status["cache_mode"] == "elastic"
    finally:
        stop_group(proc)
