"""``python -m loadtests.minio``: a distributed, erasure-coded MinIO (4 nodes x 2 drives by
default) in network namespaces, until Ctrl-C. Prints the endpoints, the credentials and
how to run a client (Squall) in the client namespace, where the addresses exist."""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
import tempfile
from pathlib import Path

from loadtests.minio.cluster import MinioCluster, unavailable
from loadtests.minio.install import missing_reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.minio", description=__doc__)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--drives", type=int, default=2, help="drives per node")
    parser.add_argument("--work", type=Path, default=None,
                        help="directory of the drives and logs (default: a new temporary one)")
    parser.add_argument("--bucket", default="squall-store",
                        help="bucket created for Squall's shared mapping ('' for none)")
    args = parser.parse_args(argv)
    reason = unavailable() or missing_reason()
    if reason is not None:
        print(f"loadtests.minio: {reason}", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="squall-minio-"))
    access, secret = "squall" + secrets.token_hex(4), secrets.token_hex(16)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop as on Ctrl-C
    cluster = MinioCluster(work, access, secret, nodes=args.nodes, drives=args.drives)
    try:
        cluster.start()
        assert cluster.client is not None
        if args.bucket:
            cluster.client.run([sys.executable, "-c", _MAKE_BUCKET, cluster.endpoint, access,
                                secret, args.bucket], env=cluster.client_env(), check=True)
        backend = f"s3:{cluster.endpoint}?bucket={args.bucket}" if args.bucket else \
            f"s3:{cluster.endpoint}"
        print(f"MinIO {args.nodes} nodes x {args.drives} drives, healthy; data and logs in "
              f"{work}\nendpoints: {' '.join(cluster.endpoints)}\n"
              f"access key: {access}\nsecret key: {secret}\n"
              f"the addresses exist only in the namespaces; run clients in "
              f"{cluster.client.netns}, e.g.:\n"
              f"  SQUALL_UPSTREAM_ACCESS_KEY={access} SQUALL_UPSTREAM_SECRET_KEY={secret} \\\n"
              f"  ip netns exec {cluster.client.netns} squall serve --backend '{backend}'\n"
              f"Ctrl-C stops everything.", flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


_MAKE_BUCKET = """
import sys, boto3
endpoint, access, secret, bucket = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access,
                  aws_secret_access_key=secret, region_name="us-east-1")
s3.create_bucket(Bucket=bucket)
"""

if __name__ == "__main__":
    sys.exit(main())
