"""`daca-bench sandbox build | run FILE | selftest`."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from .image import SANDBOX_DIR, build
from .pool import get_pool
from .protocol import SandboxUnavailable


# ---------------------------------------------------------------- CLI hooks
def hostile_cases() -> list[dict]:
    """The hostile programs of sandbox/hostile.py (name, code, test, expected statuses, route)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("daca_sandbox_hostile", SANDBOX_DIR / "hostile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


def configure(parser) -> None:
    sub = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="build the sandbox image (reused when the recipe hash is unchanged)")
    b.add_argument("--force", action="store_true", help="rebuild even if an image of this recipe exists")
    b.add_argument(
        "--method",
        choices=("auto", "debootstrap", "dockerfile"),
        default="auto",
        help="debootstrap from the apt mirror (root, default) or sandbox/Dockerfile (needs a registry)",
    )
    r = sub.add_parser("run", help="run a program file in the sandbox and print the JSON result")
    r.add_argument("file")
    r.add_argument("--timeout", type=float, default=5.0)
    r.add_argument("--test", help="file with test code to run after the program")
    sub.add_parser("selftest", help="run the hostile programs against the live pool and print a table")


def run(args) -> int:
    try:
        if args.sandbox_command == "build":
            print(build(force=args.force, method=args.method))
            return 0
        if args.sandbox_command == "run":
            test = Path(args.test).read_text() if args.test else ""
            res = get_pool(size=1).run(Path(args.file).read_text(), test, args.timeout)
            print(json.dumps(asdict(res), indent=2))
            return 0 if res.passed else 1
        return _selftest()
    except SandboxUnavailable as e:
        print(f"daca-bench sandbox: {e}", file=sys.stderr)
        return 3


def _selftest() -> int:
    pool = get_pool()
    cases = hostile_cases()
    if pool.backend == "local-unsafe" and not all(s.isolated for s in pool.slots):
        print(
            "local-unsafe backend without its own PID namespace (not root?): skipping "
            + ", ".join(c["name"] for c in cases if c["host_danger"]),
            file=sys.stderr,
        )
        cases = [c for c in cases if not c["host_danger"]]
    t0 = time.monotonic()
    results = pool.run_batch([(c["code"], c["test"]) for c in cases], timeout=3.0)
    rows = [(c["name"], "|".join(c["expected"]), r.status, r.status in c["expected"]) for c, r in zip(cases, results)]
    width = max(len(r[0]) for r in rows)
    print(f"{'program':<{width}}  {'expected':<22} {'got':<13} ok")
    for name, exp, got, ok in rows:
        print(f"{name:<{width}}  {exp:<22} {got:<13} {'ok' if ok else 'FAIL'}")
    bad = sum(not r[3] for r in rows)
    print(f"\n{len(rows) - bad}/{len(rows)} as expected in {time.monotonic() - t0:.1f}s, backend {pool.backend}")
    return 1 if bad else 0
