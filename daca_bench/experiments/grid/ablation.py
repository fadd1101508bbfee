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
runs in OUT/<axis values>/, locally or on Ray (executors.py); a cell with summary.json is
skipped, an unfinished one resumes from its checkpoint, a failed one is retried once and then
reported, and one failure never loses the others. A lock file per cell keeps two runners on one
grid from colliding. Where a task's cells start from one `train.init`, that init is scored once
on their test set (OUT/start/<task>/eval.jsonl, `evaluate_starts`): the table's start row and the
baseline's gain over it, as reproduce does for its SFT starts (`--no-start` skips it).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...config import ConfigError, RLConfig, apply, load_config, parse_overrides, read_yaml, to_dict, trl_aliases
from .executors import run_local, run_ray
from .headline import VARIANTS, named_keys, split_variant  # noqa: F401 - VARIANTS: re-exported
from .provenance import check_tree, describe, weights_hash


@dataclass(frozen=True)
class Cell:
    name: str
    axes: dict
    config: RLConfig
    provenance: dict = field(default_factory=dict)  # {"git", "init_sha256"}: stamp_cells, once per grid


def stamp_cells(cells: list[Cell], code: str, tree: str = "") -> list[Cell]:
    """The cells with the grid's code (`git describe` and provenance.code_tree, read once by the
    caller) and the hash of each one's init weights (hashed once per distinct init)."""
    hashes: dict[str, str] = {}
    out = []
    for c in cells:
        init = c.config.train.init or c.config.model.name
        if init not in hashes:
            hashes[init] = weights_hash(init)
        out.append(
            replace(c, provenance={"git": code, **({"code_tree": tree} if tree else {}), "init_sha256": hashes[init]})
        )
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
    raise ConfigError(
        f"grid base: {base!r} is neither a config file (base: configs/tiny.yaml) nor a mapping of keys "
        "(base: {train.steps: 4}); give one of the two"
    )


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
            raise ConfigError(
                f"variants {meaning[name]!r} and {value!r} would both be {name!r} in the table; "
                "one grid gives a variant name one meaning"
            )
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


def evaluate_starts(cells: list[Cell], folder: Path) -> dict[str, float]:
    """The RL start (each task's init: a family's SFT model) scored once on its task's evaluation set,
    built by the function the trainer builds its cells' set with (eval.evaluate.eval_task), with the
    cells' canvas: FOLDER/start/<task>/eval.jsonl, the reference of the baseline's gain (the table's
    start row). Cached by the init weights' content (not their path), the set and the canvas."""
    from ...engine.policy import load_initial
    from ...eval.evaluate import eval_task, evaluate, write_eval_records
    from ...registry import ids_digest, read_excluded, task_record
    from ..analysis.results import START

    out, inits = {}, {}
    for c in cells:
        inits.setdefault(c.config.train.task, set()).add(c.config.train.init)
    for cfg in {c.config.train.task: c.config for c in cells}.values():
        t = cfg.train
        if len(inits[t.task]) > 1:  # several SFT starts (sft_start): no one start row; the table says so
            continue
        target = folder / START / t.task
        key = json.dumps(
            {
                "init_sha256": weights_hash(t.init or cfg.model.name),
                "test_seed": t.test_seed,
                "n_eval": t.n_eval,
                "eval": to_dict(cfg.eval),
                "split": t.eval_split,
                **(
                    {"test_exclude": [t.test_exclude, ids_digest(read_excluded(t.test_exclude))]}
                    if t.test_exclude
                    else {}
                ),
                "chat_template": t.chat_template,
                "prefill": bool(t.max_prompt_length),
            },
            sort_keys=True,
        )
        done = json.loads((target / "summary.json").read_text()) if (target / "summary.json").exists() else {}
        if done.get("key") == key:
            out[t.task] = done["test_accuracy"]
            continue
        target.mkdir(parents=True, exist_ok=True)
        adapter = load_initial(cfg)
        task = eval_task(cfg, adapter)
        result = evaluate(adapter, task, cfg.eval, n=t.n_eval)
        write_eval_records(target / "eval.jsonl", result)
        (target / "summary.json").write_text(
            json.dumps(
                {
                    "task": t.task,
                    "test_accuracy": result["accuracy"],
                    "statuses": result["statuses"],
                    "key": key,
                    "task_record": task_record(t.task, task.samples[: result["n"]]),
                }
            )
            + "\n"
        )
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
        same = {
            json.dumps(
                [
                    c.config.train.init,
                    c.config.train.eval_split,
                    c.config.train.n_eval,
                    c.config.train.test_seed,
                    c.config.train.test_exclude,
                    c.config.train.chat_template,
                    bool(c.config.train.max_prompt_length),
                    to_dict(c.config.eval),
                ],
                sort_keys=True,
            )
            for c in group
        }
        if len(same) == 1:
            keep.append(group[0])
        else:
            notes.append(
                f"no start row for {task}: its cells start from different inits or score different test "
                "sets (train.init, train.eval_split / n_eval / test_seed / test_exclude, eval.*)"
            )
    return keep, notes


# ---- CLI: `daca-bench ablate` -------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("grid", help="grid YAML (base, overrides, axes)")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="added to the grid's overrides for every cell (e.g. train.steps=2 for a smoke run)",
    )
    parser.add_argument("--output-dir", default="results/grid", help="one folder per cell goes here")
    parser.add_argument("--workers", type=int, default=0, help="parallel cells (default: one per core)")
    parser.add_argument("--retries", type=int, default=1)
    parser.add_argument("--dry-run", action="store_true", help="list the cells and stop")
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--cpus-per-cell", type=int, default=1)
    parser.add_argument("--gpus-per-cell", type=float, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    parser.add_argument(
        "--no-start",
        action="store_true",
        help="do not score the cells' train.init on their test set (the table's start row)",
    )


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
        results = run_ray(
            cells,
            args.output_dir,
            args.address,
            args.cpus_per_cell,
            args.gpus_per_cell,
            args.retries,
            progress=progress,
        )
    else:
        results = run_local(cells, args.output_dir, args.workers, args.retries, progress=progress)
    for c in starts:  # the init, scored on the cells' own test set: the table's start row
        evaluate_starts([c], Path(args.output_dir))
        print(
            f"the start ({c.config.train.init}) scored on {c.config.train.task}'s test set: "
            f"{Path(args.output_dir) / 'start' / c.config.train.task / 'eval.jsonl'}"
        )
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
