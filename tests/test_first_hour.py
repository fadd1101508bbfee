"""A new user's first hour: a grid survives a killed worker, `eval` never reports another model's
rows, every canvas is checked before the first step, a core-only install names the extra."""
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from daca_bench.experiments.ablation import expand, run_local

ROOT = Path(__file__).resolve().parent.parent
QUICK = {"train.task": "even_length", "train.prompts_per_step": 2, "train.num_generations": 4,
         "train.n_eval": 4, "train.init": "", "train.threads": 1, "rollout.block_length": 4, "rollout.steps": 4,
         "eval.block_length": 4, "eval.steps": 4}


def _workers() -> list[int]:
    """This process's spawned pool workers (not the resource tracker)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(next(line for line in (entry / "status").read_text().splitlines() if line.startswith("PPid:")).split()[1])
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, StopIteration):
            continue
        if ppid == os.getpid() and b"spawn_main" in cmd:
            out.append(int(entry.name))
    return out


@pytest.mark.slow
def test_a_grid_survives_a_worker_killed_mid_cell(tmp_path, capsys):
    steps = 12
    cells = expand({"overrides": {**QUICK, "train.steps": steps, "train.save_every": 2},
                    "axes": {"train.seed": [0, 1, 2]}})
    killed = {}

    def kill_one_mid_cell():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            started = [c.name for c in cells if (tmp_path / c.name / "checkpoint-2").exists()
                       and not (tmp_path / c.name / "summary.json").exists()]
            workers = _workers()
            if started and workers:
                os.kill(workers[0], signal.SIGKILL)  # what the OOM killer sends
                killed["pid"] = workers[0]
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_mid_cell, daemon=True)
    killer.start()
    results = run_local(cells, tmp_path, workers=2, retries=1, progress=False)
    killer.join()
    assert killed, "no worker was running a cell to kill"
    # every cell finished in this same run (a worker stopped by the broken pool may finish a queued cell
    # first, which the new pool then finds done: "skipped")
    assert {r["status"] for r in results} <= {"done", "skipped"}
    lost = [r["cell"] for r in results if r.get("worker_lost")]
    assert len(lost) == 1
    err = capsys.readouterr().err
    assert f"the worker running {lost[0]} died (SIGKILL)" in err
    for c in cells:
        assert json.loads((tmp_path / c.name / "summary.json").read_text())["steps"] == steps
        logged = [json.loads(x)["step"] for x in (tmp_path / c.name / "metrics.jsonl").read_text().splitlines()]
        assert logged == list(range(1, steps + 1))  # resumed from its checkpoint: no step logged twice
