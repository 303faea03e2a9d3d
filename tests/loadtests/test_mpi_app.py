"""The MPI application of :mod:`loadtests.mpi.app` through ``squall mount`` in front of a
real object store (a single-node MinIO on loopback): N-N and N-1 checkpoints of a small IOR
model between stencil sweeps, a restart read by a new job through a fresh mount, and every
file the same through the mount, on the store, and as the application's manifest says."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from gateway.client.credentials import Credentials
from gateway.cost.calibrate import GatewayClient, wait_quiet
from loadtests.bench.fuse import ACCESS_KEY, SECRET_KEY, fuse_unavailable
from loadtests.bench.mpi_seed_runs import (
    Shape,
    Store,
    app_argv,
    gateway_env,
    mount,
    verify_on_store,
)
from loadtests.bench.server import ServerProcess, squall_server
from loadtests.minio.install import missing_reason
from loadtests.minio.single import single_node
from loadtests.mpi.ior import IorModel
from loadtests.mpi.launch import mpi_unavailable, run_mpi

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BUCKET = "squall-store"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    for reason in (missing_reason(), fuse_unavailable(), mpi_unavailable()):
        if reason is not None:
            pytest.skip(reason)
    server: ServerProcess = single_node(tmp_path_factory.mktemp("minio"), ACCESS_KEY,
                                        SECRET_KEY)
    server.start()
    try:
        boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY, region_name="us-east-1"
                     ).create_bucket(Bucket=BUCKET)
        yield Store(server.endpoint, ACCESS_KEY, SECRET_KEY, BUCKET)
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["nn", "n1"])
def test_checkpoints_and_restart_through_the_mount_are_the_bytes_on_the_store(
        store: Store, tmp_path: Path, mode: str) -> None:
    model = IorModel.parse(4, 3, "64k", "16k", mode)  # 4 ranks x 3 segments x 64 KiB
    shape = Shape(model, iterations=6, checkpoints=2)
    args = ["--backend", f"s3:{store.endpoint}?bucket={store.bucket}", "--cache-size", "64MiB"]
    bucket = f"app-{mode}"
    manifest_path, log = tmp_path / "manifest.json", tmp_path / "mpi.log"
    with squall_server("gw", args, tmp_path, gateway_env(store)) as server:
        gw = GatewayClient(server.endpoint, Credentials(ACCESS_KEY, SECRET_KEY))
        gw.request("PUT", f"/{bucket}")
        with mount(server.endpoint, bucket, shape, tmp_path) as root:
            ran = run_mpi(app_argv(shape, root / "run", "--iterations", "6", "--checkpoints",
                                   "2", "--manifest", str(manifest_path)),
                          log_path=log, timeout=120)
        assert [name for name, _ in ran["phases"]] == [
            "init", "compute1", "ckpt1", "compute2", "ckpt2"]
        manifest = json.loads(manifest_path.read_text())
        assert sorted(manifest["digests"]) == ["0", "1", "2"]
        assert manifest["digests"]["1"] != manifest["digests"]["2"]  # the sweeps changed it
        with mount(server.endpoint, bucket, shape, tmp_path) as root:  # a new job restarts
            restarted = run_mpi(app_argv(shape, root / "run", "--restart", "--manifest",
                                         str(manifest_path)), log_path=log, timeout=120)
            assert restarted["bad_blocks"] == 0
            wait_quiet(gw, 60)  # everything flushed to the store
            s3 = boto3.client("s3", endpoint_url=store.endpoint,
                              aws_access_key_id=store.access_key,
                              aws_secret_access_key=store.secret_key, region_name="us-east-1")
            files = sorted({model.path(step, r) for step in range(3) for r in range(4)})
            assert len(files) == (12 if mode == "nn" else 3)
            for name in files:
                through_mount = (root / "run" / name).read_bytes()
                on_store = s3.get_object(Bucket=store.bucket,
                                         Key=f"{bucket}/run/{name}")["Body"].read()
                assert len(through_mount) == model.rank_bytes * (1 if mode == "nn" else 4)
                assert hashlib.sha256(through_mount).digest() == \
                    hashlib.sha256(on_store).digest(), name
        assert verify_on_store(store, bucket, shape, manifest, "run/") == 4 * 3
