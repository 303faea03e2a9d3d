"""``python -m gateway.fuse_mount [mount] ENDPOINT BUCKET MOUNTPOINT [options]``."""

from __future__ import annotations

import argparse
import sys

from gateway.fuse_mount.cli import register, run


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["mount"] and not set(argv) & {"-h", "--help"}:
        argv.insert(0, "mount")
    parser = argparse.ArgumentParser(prog="squall")
    register(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

