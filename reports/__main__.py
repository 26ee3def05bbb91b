"""``python -m reports STORE_DIR...``: build the report of each store; ``--index ROOT`` the index."""

from __future__ import annotations

import argparse
import sys

from . import build_index, build_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    ap.add_argument("stores", nargs="*", help="store directories (store/<test>/<time>)")
    ap.add_argument("--index", metavar="ROOT", help="also write ROOT/index.html over every run in ROOT")
    ap.add_argument("--build-missing", action="store_true", help="with --index: build missing reports")
    args = ap.parse_args(argv)
    if not args.stores and not args.index:
        ap.error("give a store directory or --index ROOT")
    for store in args.stores:
        print(build_report(store))
    if args.index:
        print(build_index(args.index, build_missing=args.build_missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
