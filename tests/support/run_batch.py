"""Several `daca-bench` command lines in one launch (one python process, or one torchrun job): the tests of the
engine compare many small runs, and starting the interpreter, torch and a process group for each cost more than
the runs (tests/integration/test_parallel.py). Each line runs as `daca-bench ...` would, in order, with its exit code
written to `codes.json` (rank 0); the process group is kept between lines and left once at the end.

    python tests/support/run_batch.py LINES.json                  # LINES.json: [[argv...], ...]
    python -m torch.distributed.run --nproc_per_node 2 tests/support/run_batch.py LINES.json
"""

import json
import sys
import traceback
from pathlib import Path


def main(spec: str) -> int:
    from daca_bench.cli import main as daca_main
    from daca_bench.engine.parallel import Parallel, rank_and_world

    close = Parallel.close
    Parallel.close = staticmethod(lambda: None)  # one process group for every line of the batch
    codes = []
    try:
        for argv in json.loads(Path(spec).read_text()):
            print(f"=== {' '.join(argv)}", file=sys.stderr, flush=True)
            try:
                codes.append(daca_main(argv))
            except Exception:  # noqa: BLE001 - the line fails, the batch goes on (the test names it)
                traceback.print_exc()
                codes.append(1)
    finally:
        if rank_and_world()[0] == 0:
            Path(spec).with_name(Path(spec).stem + ".codes.json").write_text(json.dumps(codes))
        close()
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
