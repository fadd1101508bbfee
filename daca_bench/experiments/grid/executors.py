"""Running a grid's cells (ablation.Cell), each a training run in OUT/<cell name>/: in local worker
processes (`run_local`, the default executor) or as one Ray task per cell (`run_ray`, `--executor ray`).

    results = run_local(expand(load_grid("grids/tiny.yaml")), "runs/grid", workers=2)

A cell with summary.json is skipped, an unfinished one resumes from its checkpoint, a failed one is
retried and then reported (error.txt), and one failure never loses the others; a lock file per cell
keeps two runners apart, and a folder written under another config or init is set aside. A cell
given several GPUs runs as one torchrun job of this module (`train_cell`).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from ...config import RLConfig, load_config
from ...engine.checkpoint import checkpoints
from ...errors import UnavailableError
from ...runfolder import changes, set_aside
from .jobs import Job, run_jobs, split_cores

if TYPE_CHECKING:
    from .ablation import Cell

PROVENANCE = ".provenance.json"  # in a cell folder: what its first attempt ran (git, init weights' hash)


def _set_aside_if_stale(folder: Path, cfg: RLConfig, provenance: dict | None = None) -> str | None:
    """A cell folder written under another config (say, an edited grid) or from other init weights
    (a retrained SFT start at the same path) is moved into FOLDER/.stale/N/ instead of being skipped
    or resumed (runfolder.changes / set_aside, as `train --fresh` does); returns that path."""
    stored = folder / "config.json"
    if not stored.exists():
        return None
    raw = json.loads(stored.read_text())
    side = json.loads((folder / PROVENANCE).read_text()) if (folder / PROVENANCE).exists() else {}
    was = raw.get("init_sha256") or side.get("init_sha256")  # unknown for cells run before it was recorded
    now = (provenance or {}).get("init_sha256")
    if not changes(raw, cfg) and not (was and now and was != now):
        return None
    return str(set_aside(folder))


def _run_cell(cell: Cell, out: str, threads: int, retries: int, gpus: float = 0) -> dict:
    """Run one cell (resuming when possible): in this process, or with `gpus` > 1 under torchrun, one
    process per GPU; never raises."""
    import torch

    torch.set_num_threads(max(1, threads))
    folder = Path(out) / cell.name
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return {"cell": cell.name, "status": "locked"}
        stale = _set_aside_if_stale(folder, cell.config, cell.provenance)
        if (folder / "summary.json").exists():
            return {"cell": cell.name, "status": "skipped"}
        (folder / "axes.json").write_text(json.dumps(cell.axes) + "\n")
        earlier = json.loads((folder / PROVENANCE).read_text()) if (folder / PROVENANCE).exists() else {}
        if cell.provenance and not earlier:
            (folder / PROVENANCE).write_text(json.dumps(cell.provenance) + "\n")
        error = ""
        for attempt in range(retries + 1):
            try:
                train_cell(cell.config, folder, resume=bool(checkpoints(folder)), gpus=int(gpus))  # never saved: anew
                _record(folder, cell.provenance, earlier)
                (folder / "error.txt").unlink(missing_ok=True)
                return {
                    "cell": cell.name,
                    "status": "done",
                    "attempts": attempt + 1,
                    **({"replaced": stale} if stale else {}),
                }
            except Exception:  # noqa: BLE001 - one failing cell must not stop the grid
                error = traceback.format_exc()
        (folder / "error.txt").write_text(error)
        return {"cell": cell.name, "status": "failed", "error": error.strip().splitlines()[-1]}


def train_cell(cfg: RLConfig, folder: Path, resume: bool, gpus: int = 0) -> None:
    """One cell's training: in this process, or with several GPUs as `torchrun --nproc_per_node GPUS`
    running this module on the cell's resolved config (the trainer's FSDP2 path, engine/parallel.py)."""
    if gpus <= 1:
        from ...train.trainer import train

        train(cfg, folder, resume=resume, progress=False)
        return
    import subprocess

    from ...config import dump

    spec = Path(folder) / "cell_config.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    dump(cfg, spec)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(gpus),
        "-m",
        __name__,
        str(spec),
        str(folder),
        "resume" if resume else "fresh",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"torchrun of {folder} exited {done.returncode}: {done.stderr.strip()[-2000:]}")


def _record(folder: Path, provenance: dict, earlier: dict) -> None:
    """The grid's provenance into the finished cell's config.json; a cell resumed under other code
    keeps the code of its first attempt as `git_earlier`."""
    if not provenance:
        return
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(provenance)
    if earlier.get("git") not in (None, provenance.get("git")):
        cfg["git_earlier"] = earlier["git"]
    path.write_text(json.dumps(cfg, indent=2) + "\n")


def step_cost(cfg: RLConfig) -> float:
    """Relative cost of one training step (for the time-left estimate): the rollout's denoising
    passes plus, per stratum, about three passes (forward and backward) per inner update, one
    old-policy pass per inner update after the first and one reference pass per inner update
    when beta > 0, over the B*G canvases of prompt and completion."""
    t = cfg.train
    likelihood = cfg.sml.k * (3 * t.mu + (t.mu - 1) + (t.mu if cfg.loss.beta > 0 else 0))
    return t.prompts_per_step * t.num_generations * (cfg.rollout.gen_length + 32) * (cfg.rollout.steps + likelihood)


def cell_jobs(cells: list[Cell], out: str | Path, threads: int, retries: int) -> list[Job]:
    return [
        Job(
            c.name,
            _run_cell,
            (c, str(out), threads, retries),
            Path(out) / c.name,
            c.config.train.steps,
            step_cost(c.config),
        )
        for c in cells
    ]


def run_local(
    cells: list[Cell], out: str | Path, workers: int = 0, retries: int = 1, progress: bool = True, desc: str = "cells"
) -> list[dict]:
    """Cells in `workers` processes with cores/workers threads each (not oversubscribed). A worker killed
    under a cell (the OOM killer) costs no other cell: a new pool resumes them all and retries that one."""
    workers, threads = split_cores(len(cells), workers)
    results = run_jobs(
        cell_jobs(cells, out, threads, retries), workers, desc=desc, progress=progress, lost_retries=retries
    )  # a killed worker's cell resumes from its checkpoint
    return sorted(({"cell": j, **r} for j, r in zip((c.name for c in cells), results)), key=lambda r: r["cell"])


def init_ray(tries: int = 3, **kw) -> None:
    """ray.init, tried again after a slow start: Ray waits a fixed 30 s for its own node to register, which a
    loaded machine can miss ("The current node timed out during startup"); any other error is raised at once."""
    import ray

    for attempt in range(tries):
        try:
            ray.init(**kw)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for it
            ray.shutdown()
            if "timed out during startup" not in str(exc) or attempt == tries - 1:
                raise


def run_ray(
    cells: list[Cell],
    out: str | Path,
    address: str | None = None,
    cpus_per_cell: int = 1,
    gpus_per_cell: float = 0,
    retries: int = 1,
    progress: bool = True,
) -> list[dict]:
    """One Ray task per cell with the CPUs/GPUs it asks for; `address` joins a cluster (None = local)."""
    try:
        import ray
    except ImportError as exc:
        raise UnavailableError("--executor ray needs Ray: pip install 'daca-bench[ray]'") from exc
    from tqdm.auto import tqdm

    started = not ray.is_initialized()
    if started:
        init_ray(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k.startswith(("DACA_", "HF_"))}},
        )
    # a lost worker (node or process death) reruns its cell once, which resumes from its checkpoint
    remote = ray.remote(num_cpus=cpus_per_cell, num_gpus=gpus_per_cell, max_retries=retries)(_run_cell)
    # a cell given several GPUs runs them as one torchrun job of one process per GPU (train_cell)
    pending = {remote.remote(c, str(Path(out).resolve()), cpus_per_cell, retries, gpus_per_cell): c for c in cells}
    results = []
    bar = tqdm(total=len(cells), desc="cells (ray)", disable=not progress, unit="cell")
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            cell = pending.pop(ref)
            try:
                results.append(ray.get(ref))
            except Exception as exc:  # noqa: BLE001 - a lost worker is a failed cell, not a lost grid
                results.append({"cell": cell.name, "status": "failed", "error": f"ray: {exc}"})
            bar.update(1)
    bar.close()
    if started:
        ray.shutdown()
    return sorted(results, key=lambda r: r["cell"])


if __name__ == "__main__":  # under torchrun, from train_cell: CONFIG FOLDER resume|fresh
    from ...train.trainer import train as _train

    _cfg_path, _folder, _mode = sys.argv[1:4]
    _train(load_config(_cfg_path, [], RLConfig), _folder, resume=_mode == "resume", progress=False)
