"""Wait until every URL given answers 200 (run inside a namespace: ``python -m
loadtests.minio.probe TIMEOUT URL...``; exit status 0 when they all did in time)."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait(urls: list[str], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    pending = list(urls)
    while pending:
        pending = [url for url in pending if not answers(url)]
        if pending and time.monotonic() > deadline:
            print("not ready: " + " ".join(pending), file=sys.stderr)
            return False
        if pending:
            time.sleep(0.5)
    return True


def main(argv: list[str]) -> int:
    return 0 if wait(argv[1:], float(argv[0])) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
