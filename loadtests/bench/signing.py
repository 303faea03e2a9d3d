"""What the clients' SigV4 signer costs per request, beside botocore's for the same
requests: ``python -m loadtests.bench.signing`` prints µs per signature and the ratio.

The requests are the mount's light path's (docs/fuse-mount.md, "Small files: the light
request path"): HeadObject, a PutObject with user metadata and a CRC32C header, a ranged
GET and a listing page, payload unsigned.
"""

from __future__ import annotations

import argparse
import functools
import timeit
from collections.abc import Callable, Mapping, Sequence

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials as BotoCredentials

from gateway.client.credentials import Credentials
from gateway.client.sigv4 import Signer

BASE = "http://127.0.0.1:9000/bucket/"
#: name -> (method, url, headers)
REQUESTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "HeadObject": ("HEAD", BASE + "dir/file.dat", {}),
    "PutObject": ("PUT", BASE + "dir/file.dat", {
        "Content-Length": "4096", "x-amz-checksum-crc32c": "AAAAAA==",
        "x-amz-meta-mode": "33188", "x-amz-meta-mtime": "1764400000.5"}),
    "GetObject range": ("GET", BASE + "dir/file.dat", {"Range": "bytes=0-8388607"}),
    "ListObjectsV2": ("GET", BASE + "?list-type=2&prefix=dir%2F&delimiter=%2F", {}),
}


def _botocore(method: str, url: str, headers: Mapping[str, str]) -> Callable[[], None]:
    auth = S3SigV4Auth(BotoCredentials("AKID", "se/cret+key"), "s3", "us-east-1")
    config = Config(s3={"payload_signing_enabled": False})

    def sign() -> None:
        request = AWSRequest(method=method, url=url, data=b"", headers=dict(headers))
        request.context["client_config"] = config
        auth.add_auth(request)
    return sign


def _us(sign: Callable[[], object], number: int, repeat: int) -> float:
    return min(timeit.repeat(sign, number=number, repeat=repeat)) / number * 1e6


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m loadtests.bench.signing",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=20_000, help="signatures per timing")
    p.add_argument("--repeat", type=int, default=5, help="timings; the best is kept")
    args = p.parse_args(argv)
    signer = Signer(Credentials("AKID", "se/cret+key"))
    print("| request | squall signer (µs) | botocore S3SigV4Auth (µs) | squall / botocore |")
    print("|---|---:|---:|---:|")
    for name, (method, url, headers) in REQUESTS.items():
        ours = _us(functools.partial(signer.sign, method, url, headers), args.number,
                   args.repeat)
        theirs = _us(_botocore(method, url, headers), args.number, args.repeat)
        print(f"| {name} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}x |")


if __name__ == "__main__":
    main()
