"""Ablation grids: a base config plus axes, expanded into cells that are normal training runs.

    daca-bench ablate grids/tiny.yaml --workers 2
    daca-bench ablate grids/tiny.yaml --executor ray --address HOST:6379 --gpus-per-cell 1
    daca-bench ablate grids/tiny.yaml train.steps=2   # KEY=VALUE: over the grid's overrides, every cell

A grid file:
    base: configs/tiny.yaml          # an RL preset
    overrides: {train.steps: 60}     # applied to every cell
    axes:                            # the Cartesian product of these
      variant: [baseline, +DPS, +SML, +DACA]
      train.task: [arithmetic]
      train.seed: [0, 1]
`variant` names a bundle of keys (VARIANTS) or a preset's cell (`headline:+DACA`: what
`train --variant +DACA` runs; headline.py); any other axis is a dotted config key. Each cell
runs in OUT/<axis values>/; a cell with summary.json is skipped, an unfinished one resumes
from its checkpoint, a failed one is retried once and then reported, and one failure never
loses the others. A lock file per cell keeps two runners on one grid from colliding. Where a
task's cells start from one `train.init`, that init is scored once on their test set
(OUT/start/<task>/eval.jsonl, `evaluate_starts`): the table's start row and the baseline's gain
over it, as reproduce does for its SFT starts (`--no-start` skips it).
"""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import sys
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...engine.checkpoint import checkpoints
from ...config import ConfigError, RLConfig, apply, load_config, parse_overrides, read_yaml, to_dict, trl_aliases
from ...errors import UnavailableError
from ...runfolder import changes, set_aside
from .headline import VARIANTS, named_keys, split_variant  # noqa: F401 - VARIANTS: re-exported
from .jobs import Job, run_jobs, split_cores
from .provenance import check_tree, describe, weights_hash

@dataclass(frozen=True)
class Cell:
    name: str
    axes: dict
    config: RLConfig
    provenance: dict = field(default_factory=dict)  # {"git", "init_sha256"}: stamp_cells, once per grid


PROVENANCE = ".provenance.json"  # in a cell folder: what its first attempt ran (git, init weights' hash)


def stamp_cells(cells: list[Cell], code: str, tree: str = "") -> list[Cell]:
    """The cells with the grid's code (`git describe` and provenance.code_tree, read once by the
    caller) and the hash of each one's init weights (hashed once per distinct init)."""
    hashes: dict[str, str] = {}
    out = []
    for c in cells:
        init = c.config.train.init or c.config.model.name
        if init not in hashes:
            hashes[init] = weights_hash(init)
        out.append(replace(c, provenance={"git": code, **({"code_tree": tree} if tree else {}),
                                          "init_sha256": hashes[init]}))
    return out


def slug(key: str, value) -> str:
    text = f"{key.split('.')[-1]}={value}"
    return re.sub(r"[^A-Za-z0-9=.+_-]", "_", text)


def grid_base(base, root: Path = Path(".")) -> RLConfig:
    """A grid's `base:`: a config file (relative to the grid's folder), a mapping of keys taken as overrides
    on the default config ({train.steps: 4} or {train: {steps: 4}}), or nothing (the default config)."""
    if not base:
        return load_config(None, [], RLConfig)
    if isinstance(base, dict):
        return apply(load_config(None, [], RLConfig), base)
    if isinstance(base, (str, Path)):
        return load_config(root / base, [], RLConfig)
    raise ConfigError(f"grid base: {base!r} is neither a config file (base: configs/tiny.yaml) nor a mapping of keys "
                      "(base: {train.steps: 4}); give one of the two")


def expand(grid: dict, root: Path = Path(".")) -> list[Cell]:
    """Grid mapping -> cells (the Cartesian product of the axes), each with its resolved config. A
    variant of VARIANTS applies its bundle where its axis stands; a preset's cell (`headline:+DACA`,
    headline.split_variant) applies its keys under the grid's own, as `train --variant` does: base,
    the cell's keys for the cell's task, the overrides, the other axes. Its axes.json records the
    variant's NAME and `cells_of` its SOURCE; a name with two meanings in one grid is an error."""
    unknown = set(grid) - {"base", "overrides", "axes"}
    if unknown:
        raise ConfigError(f"unknown grid keys {sorted(unknown)}; a grid has base, overrides and axes")
    base = grid_base(grid.get("base"), root)
    overrides = grid.get("overrides") or {}
    axes = grid.get("axes") or {}
    meaning = {}
    for value in axes.get("variant", []):
        source, name = split_variant(value)
        if meaning.setdefault(name, value) != value:
            raise ConfigError(f"variants {meaning[name]!r} and {value!r} would both be {name!r} in the table; "
                              "one grid gives a variant name one meaning")
    cells = []
    for values in itertools.product(*axes.values()):
        point = dict(zip(axes, values))
        source, name = split_variant(point["variant"]) if "variant" in point else ("", "")
        cfg, recorded = apply(base, overrides), dict(point)
        if source:
            task = _apply_axes(cfg, point).train.task
            cfg = apply(apply(base, named_keys(point["variant"], task)), overrides)
            recorded.update(variant=name, cells_of=source)
        cells.append(Cell("_".join(slug(k, v) for k, v in point.items()) or "cell", recorded, _apply_axes(cfg, point)))
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise ConfigError("two cells share a folder name; make the axis values distinct")
    return cells


def _apply_axes(cfg: RLConfig, point: dict) -> RLConfig:
    """CFG with a cell's axis values in their order (a variant of VARIANTS: its bundle; a preset's
    cell applies nothing here: expand set its keys beneath the overrides)."""
    for key, value in point.items():
        if key != "variant":
            cfg = apply(cfg, {key: value})
        elif not split_variant(value)[0]:
            cfg = apply(cfg, VARIANTS[value])
    return cfg


def load_grid(path: str | Path) -> dict:
    data = read_yaml(path, "grid")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a grid is a mapping with base, overrides and axes")
    return data


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
                return {"cell": cell.name, "status": "done", "attempts": attempt + 1,
                        **({"replaced": stale} if stale else {})}
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
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(gpus),
               "-m", __name__, str(spec), str(folder), "resume" if resume else "fresh"]
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


def evaluate_starts(cells: list[Cell], folder: Path) -> dict[str, float]:
    """The RL start (each task's init: a family's SFT model) scored once on its task's evaluation set,
    built by the function the trainer builds its cells' set with (eval.evaluate.eval_task), with the
    cells' canvas: FOLDER/start/<task>/eval.jsonl, the reference of the baseline's gain (the table's
    start row). Cached by the init weights' content (not their path), the set and the canvas."""
    from ...registry import ids_digest, read_excluded, task_record
    from ...eval.evaluate import eval_task, evaluate, write_eval_records
    from ...engine.policy import load_initial
    from ..analysis.results import START

    out, inits = {}, {}
    for c in cells:
        inits.setdefault(c.config.train.task, set()).add(c.config.train.init)
    for cfg in {c.config.train.task: c.config for c in cells}.values():
        t = cfg.train
        if len(inits[t.task]) > 1:  # several SFT starts (sft_start): no one start row; the table says so
            continue
        target = folder / START / t.task
        key = json.dumps({"init_sha256": weights_hash(t.init or cfg.model.name), "test_seed": t.test_seed,
                          "n_eval": t.n_eval, "eval": to_dict(cfg.eval), "split": t.eval_split,
                          **({"test_exclude": [t.test_exclude, ids_digest(read_excluded(t.test_exclude))]} if t.test_exclude else {}),
                          "chat_template": t.chat_template, "prefill": bool(t.max_prompt_length)}, sort_keys=True)
        done = json.loads((target / "summary.json").read_text()) if (target / "summary.json").exists() else {}
        if done.get("key") == key:
            out[t.task] = done["test_accuracy"]
            continue
        target.mkdir(parents=True, exist_ok=True)
        adapter = load_initial(cfg)
        task = eval_task(cfg, adapter)
        result = evaluate(adapter, task, cfg.eval, n=t.n_eval)
        write_eval_records(target / "eval.jsonl", result)
        (target / "summary.json").write_text(json.dumps({"task": t.task, "test_accuracy": result["accuracy"],
                                                         "statuses": result["statuses"], "key": key,
                                                         "task_record": task_record(t.task, task.samples[:result["n"]])})
                                             + "\n")
        out[t.task] = result["accuracy"]
    return out


def start_cells(cells: list[Cell]) -> tuple[list[Cell], list[str]]:
    """A grid's starts: per task whose cells all start from one train.init and score one test set (the
    same canvas), one of its cells (evaluate_starts scores that init once: the table's start row); and
    a line for each task whose cells start from an init but not from one init on one set."""
    by_task: dict[str, list[Cell]] = {}
    for c in cells:
        by_task.setdefault(c.config.train.task, []).append(c)
    keep, notes = [], []
    for task, group in sorted(by_task.items()):
        if not any(c.config.train.init for c in group):
            continue
        same = {json.dumps([c.config.train.init, c.config.train.eval_split, c.config.train.n_eval, c.config.train.test_seed,
                            c.config.train.test_exclude, c.config.train.chat_template,
                            bool(c.config.train.max_prompt_length), to_dict(c.config.eval)], sort_keys=True)
                for c in group}
        if len(same) == 1:
            keep.append(group[0])
        else:
            notes.append(f"no start row for {task}: its cells start from different inits or score different test "
                         "sets (train.init, train.eval_split / n_eval / test_seed / test_exclude, eval.*)")
    return keep, notes


def step_cost(cfg: RLConfig) -> float:
    """Relative cost of one training step (for the time-left estimate): the rollout's denoising
    passes plus, per stratum, about three passes (forward and backward) per inner update, one
    old-policy pass per inner update after the first and one reference pass per inner update
    when beta > 0, over the B*G canvases of prompt and completion."""
    t = cfg.train
    likelihood = cfg.sml.k * (3 * t.mu + (t.mu - 1) + (t.mu if cfg.loss.beta > 0 else 0))
    return t.prompts_per_step * t.num_generations * (cfg.rollout.gen_length + 32) * (cfg.rollout.steps + likelihood)


def cell_jobs(cells: list[Cell], out: str | Path, threads: int, retries: int) -> list[Job]:
    return [Job(c.name, _run_cell, (c, str(out), threads, retries), Path(out) / c.name, c.config.train.steps,
                step_cost(c.config)) for c in cells]


def run_local(cells: list[Cell], out: str | Path, workers: int = 0, retries: int = 1, progress: bool = True,
              desc: str = "cells") -> list[dict]:
    """Cells in `workers` processes with cores/workers threads each (not oversubscribed). A worker killed
    under a cell (the OOM killer) costs no other cell: a new pool resumes them all and retries that one."""
    workers, threads = split_cores(len(cells), workers)
    results = run_jobs(cell_jobs(cells, out, threads, retries), workers, desc=desc, progress=progress,
                       lost_retries=retries)  # a killed worker's cell resumes from its checkpoint
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


def run_ray(cells: list[Cell], out: str | Path, address: str | None = None, cpus_per_cell: int = 1,
            gpus_per_cell: float = 0, retries: int = 1, progress: bool = True) -> list[dict]:
    """One Ray task per cell with the CPUs/GPUs it asks for; `address` joins a cluster (None = local)."""
    try:
        import ray
    except ImportError as exc:
        raise UnavailableError("--executor ray needs Ray: pip install 'daca-bench[ray]'") from exc
    from tqdm.auto import tqdm

    started = not ray.is_initialized()
    if started:
        init_ray(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k.startswith(("DACA_", "HF_"))}})
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


# ---- CLI: `daca-bench ablate` -------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("grid", help="grid YAML (base, overrides, axes)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="added to the grid's overrides for every cell (e.g. train.steps=2 for a smoke run)")
    parser.add_argument("--output-dir", default="results/grid", help="one folder per cell goes here")
    parser.add_argument("--workers", type=int, default=0, help="parallel cells (default: one per core)")
    parser.add_argument("--retries", type=int, default=1)
    parser.add_argument("--dry-run", action="store_true", help="list the cells and stop")
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--cpus-per-cell", type=int, default=1)
    parser.add_argument("--gpus-per-cell", type=float, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    parser.add_argument("--no-start", action="store_true",
                        help="do not score the cells' train.init on their test set (the table's start row)")


def check_tasks(cells: list[Cell]) -> None:
    """Every cell's task is registered here (UnknownTaskError, one line naming --tasks-dir), before any cell runs."""
    from ...registry import task_spec

    for task in sorted({c.config.train.task for c in cells}):
        task_spec(task)


def run(args) -> int:
    grid = load_grid(args.grid)
    if args.overrides:  # the command line's keys over the grid file's, as for train and sft
        grid["overrides"] = {**(grid.get("overrides") or {}), **trl_aliases(parse_overrides(args.overrides))}
    cells = expand(grid)
    check_tasks(cells)  # --dry-run too: a grid of a task this machine does not know is no plan
    starts, notes = start_cells(cells) if not args.no_start else ([], [])
    if args.dry_run:
        for c in cells:
            print(c.name)
        for c in starts:
            print(f"start/{c.config.train.task}")
        for line in notes:
            print(line)
        return 0
    code = describe()  # once, before any worker imports the package
    check_tree(code, confirmatory=False, what="this grid")
    cells = stamp_cells(cells, code)
    progress = not args.no_progress
    if args.executor == "ray":
        results = run_ray(cells, args.output_dir, args.address, args.cpus_per_cell, args.gpus_per_cell, args.retries,
                          progress=progress)
    else:
        results = run_local(cells, args.output_dir, args.workers, args.retries, progress=progress)
    for c in starts:  # the init, scored on the cells' own test set: the table's start row
        evaluate_starts([c], Path(args.output_dir))
        print(f"the start ({c.config.train.init}) scored on {c.config.train.task}'s test set: "
              f"{Path(args.output_dir) / 'start' / c.config.train.task / 'eval.jsonl'}")
    for line in notes:
        print(line)
    failed = [r for r in results if r["status"] == "failed"]
    for r in failed:
        trace = Path(args.output_dir) / r["cell"] / "error.txt"
        print(f"FAILED {r['cell']}: {r['error']}" + (f" (see {trace})" if trace.exists() else ""))
    retried = [r["cell"] for r in results if r.get("worker_lost") and r["status"] != "failed"]
    again = f" ({', '.join(retried)} retried after its worker died)" if retried else ""
    print(f"{len(results) - len(failed)}/{len(results)} cells finished in {args.output_dir}{again}")
    return 1 if failed else 0


if __name__ == "__main__":  # under torchrun, from train_cell: CONFIG FOLDER resume|fresh
    from ...train.trainer import train as _train

    _cfg_path, _folder, _mode = sys.argv[1:4]
    _train(load_config(_cfg_path, [], RLConfig), _folder, resume=_mode == "resume", progress=False)
