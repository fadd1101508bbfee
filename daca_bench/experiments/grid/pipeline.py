"""The stages of `daca-bench reproduce`, as functions the CLI (experiments/grid/reproduce.py) and the
calibration (experiments/grid/calibrate.py) call: (1) SFT per family, cached by its config; (2) the
grid's cells (a per-base preset's lr sweep first: selection_cells); the RL start scored on the
cells' evaluation set; (3) the published folder.

    sft = run_sft(PRESETS["tiny"], Path("runs/reproduce"), workers=2, progress=True)
    cells = tiny_cells(PRESETS["tiny"], sft)
    starts = evaluate_starts(cells, Path("runs/reproduce/tiny"))   # stage 2's start: ablation.evaluate_starts
    text, paths = publish(Path("runs/reproduce/tiny"), [c.name for c in cells], out, meta)
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from ...config import ConfigError, RLConfig, RunConfig, apply, load_config, to_dict
from ...engine.checkpoint import checkpoints
from ...resources import data_dir
from ..analysis import cellstore
from ..analysis.results import START
from .ablation import VARIANTS, Cell, expand, slug
from .jobs import Job, run_jobs
from .presets import Family, PaperPreset, TinyPreset
from .readings import READINGS, overrides, reading_name

ROOT = data_dir("configs").parent  # the repository, or the installed package's _data folder


# ---- stage 1: SFT per family, cached by config --------------------------------------------
def sft_config(preset: TinyPreset, fam: Family, seed: int = 0) -> RunConfig:
    every = fam.sft_eval_every or preset.sft_eval_every
    return apply(
        RunConfig(),
        {
            "sampler": fam.canvas,
            **({"model.block_size": fam.block} if fam.block else {}),
            "sft.task": fam.task,
            "sft.steps": fam.sft_steps,
            "sft.seed": seed,
            "sft.eval_every": every,
            "sft.n_dev": preset.sft_dev,
            "sft.target_accuracy": fam.sft_target or preset.sft_target,
            "sft.save_every": every,
        },
    )


# Config keys added after SFT folders were first named, with the value that means "as before": at that
# value they are left out of the folder's hash, so a start trained before them is found again.
LATER_KEYS = (
    ("sft", "protocol", ""),
    ("train", "protocol", ""),
    ("model", "block_size", 0),
    ("dps", "scope", "completion"),
)


def sft_folder(work: Path, cfg: RunConfig) -> Path:
    from ...registry import task_spec

    fields = to_dict(cfg)
    for section, key, default in LATER_KEYS:  # keys added later: a folder named before them keeps its name
        if section in fields and fields[section].get(key, default) == default:
            fields[section].pop(key, None)
    key = json.dumps({**fields, "task_version": task_spec(cfg.sft.task).version}, sort_keys=True)
    return work / "sft" / f"{cfg.sft.task}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def _sft_job(cfg: RunConfig, folder: str) -> dict:
    from ...train.sft import train_sft

    done = Path(folder) / "summary.json"
    if done.exists():
        return {**json.loads(done.read_text()), "status": "cached"}
    return {**train_sft(cfg, folder, resume=bool(checkpoints(folder)), progress=False), "status": "done"}


def run_sft(preset: TinyPreset, work: Path, workers: int, progress: bool) -> dict[str, dict]:
    jobs = []
    for label, fam in preset.families.items():
        for seed in preset.sft_seeds:  # several SFT starts: "<label>#<sft.seed>" (start_key)
            cfg = sft_config(preset, fam, seed)
            folder = sft_folder(work, cfg)
            cost = cfg.sft.batch_size * (cfg.sampler.gen_length + 32)  # canvases x (completion + a typical prompt)
            jobs.append(Job(start_key(preset, label, seed), _sft_job, (cfg, str(folder)), folder, cfg.sft.steps, cost))
    results = run_jobs(jobs, workers, desc="1/2 SFT per family", progress=progress, left="left at most")
    out = {}
    for job, r in zip(jobs, results):
        if r.get("status") == "failed" or "accuracy" not in r:
            raise RuntimeError(f"SFT of {job.name} ({job.folder}) failed: {r.get('error')}")
        out[job.name] = {**r, "folder": str(job.folder)}
    return out


def start_key(preset: TinyPreset, label: str, seed: int) -> str:
    """A family's SFT start in run_sft's result: its label, or "<label>#<sft.seed>" with several starts."""
    return label if len(preset.sft_seeds) == 1 else f"{label}#{seed}"


# ---- stage 2: the grid ----------------------------------------------------------------------
def _family_rl(preset: TinyPreset, fam: Family, steps: int | None) -> dict:
    rl = {"train.steps": preset.rl_steps, **preset.rl, **fam.rl}
    if steps:
        rl["train.steps"] = steps
    return rl


NAMED = ("loss.base", "train.task", "variant", "train.seed")  # the axes a cell's folder is named by


def tiny_cells(
    preset: TinyPreset, sft: dict[str, dict], steps: int | None = None, seeds=None, picks: dict | None = None
) -> list[Cell]:
    """The grid. Common random numbers: the cells of one seed share the SFT start, the train
    prompts and their order, the rollout noise and the SML masks (all keyed by train.seed), and
    every cell of a family is scored on one evaluation set (train.test_seed, train.eval_split), so
    that variants differ only where the method differs. A readings sweep has one cell per
    (reading, lr) instead of per variant; a per-base preset (`arms="bases"`) has each base's own
    variants (bases_grid.confirmatory_arms, with PICKS: the sweep's picks over the preset's)."""
    if preset.arms == "bases":
        return _base_cells(preset, sft, steps, seeds, lambda rl: _confirmatory(preset, picks, rl["train.steps"]))
    if preset.arms in ("compute", "compute-starts"):  # every arm from each SFT start (compute_grid.py)
        from .compute_grid import compute_arms, seeds_by_start, starts_arms

        arms = (compute_arms if preset.arms == "compute" else starts_arms)(preset.picks, steps or preset.rl_steps)
        per = seeds_by_start(preset.sft_seeds, seeds or preset.seeds, preset.arms)
        return [
            c
            for k in preset.sft_seeds
            for c in _base_cells(
                preset,
                {label: sft.get(start_key(preset, label, k)) or sft[label] for label in preset.families},
                steps,
                per[k],
                lambda rl: arms,
                start=k,
            )
        ]
    if preset.readings:
        arms = [
            (
                reading_name(r, lr, preset.lrs[0]),
                READINGS[r][1],
                {**READINGS[r][2], "train.lr": lr},
                {"reading": r, "train.lr": lr},
            )
            for r in preset.readings
            for lr in preset.lrs
        ]
    else:
        arms = [(v, v, overrides(preset.picks, v), {}) for v in preset.variants]
    if preset.settings:  # each arm once per setting, its keys last
        arms = [
            (name, variant, {**keys, **setting}, {**extra, "setting": label})
            for label, setting in preset.settings.items()
            for name, variant, keys, extra in arms
        ]
    named = NAMED[:3] + (("setting",) if preset.settings else ()) + NAMED[3:]
    cells = []
    for label, fam in preset.families.items():
        start = str(Path(sft[label]["folder"]) / "final")
        grid = {
            "base": preset.base_config,
            "overrides": {
                "rollout": fam.canvas,
                "eval": fam.canvas,
                **_family_rl(preset, fam, steps),
                "train.task": fam.task,
                "train.init": start,
                "train.threads": 0,
            },
            "axes": {
                "loss.base": list(preset.bases),
                "train.task": [fam.task],
                "train.seed": list(seeds or fam.seeds or preset.seeds),
            },
        }
        for cell in expand(grid, ROOT):
            for name, variant, keys, extra in arms:
                if variant not in preset.base_variants.get(cell.axes["loss.base"], (variant,)):
                    continue  # a variant this base does not admit is absent, never faked
                cfg = apply(apply(cell.config, VARIANTS[variant]), keys)
                cfg = apply(cfg, preset.base_keys.get(cell.axes["loss.base"], {}))
                axes = {
                    "loss.base": cell.axes["loss.base"],
                    "train.task": fam.task,
                    "variant": name,
                    "train.seed": cell.axes["train.seed"],
                    **extra,
                }
                cells.append(Cell("_".join(slug(k, axes[k]) for k in named), axes, cfg))
    return cells


def _confirmatory(preset: TinyPreset, picks: dict | None, base_steps: int) -> list[tuple]:
    from .bases_grid import confirmatory_arms

    return confirmatory_arms({**preset.picks, **(picks or {})}, compute_ratio(), base_steps, preset.bases)


def compute_ratio() -> float:
    """+DACA's training seconds per step over the baseline's on the committed results/tiny-ablation
    cells (the default's regime): the compute-matched baseline's step multiplier, fixed by what is
    committed, not by this run."""
    from ...errors import UnavailableError
    from .bases_grid import measured_cost_ratio

    cells = ROOT / "results" / "tiny-ablation" / "cells"
    try:
        return measured_cost_ratio(cells)
    except ValueError as exc:
        raise UnavailableError(
            f"{exc}: the compute-matched baseline is sized on the committed results/tiny-ablation "
            "cells; run from a checkout of the repository"
        ) from None


def selection_cells(
    preset: TinyPreset, sft: dict[str, dict], steps: int | None = None, beyond: dict | None = None
) -> list[Cell]:
    """A per-base preset's lr sweep (bases_grid.selection_arms): each base's baseline and DACA row at
    every lr of `preset.selection`, on its selection seeds, scored on its selection split (dev); with
    `beyond`, only the arms one step past an edge pick (bases_grid.edge_extensions)."""
    from .bases_grid import selection_arms

    sel = preset.selection
    arms = selection_arms(sel, preset.picks, preset.bases, beyond)
    return _base_cells(
        preset, sft, steps, sel["selection_seeds"], lambda rl: arms, {"train.eval_split": sel["selection_split"]}
    )


def check_disjoint(preset: TinyPreset, seeds=None) -> None:
    """The sweep never touches what the confirmatory cells are scored on: its seeds and its split
    are disjoint from theirs (one line, before anything runs)."""
    sel = preset.selection
    for label, fam in preset.families.items():
        conf = set(seeds or fam.seeds or preset.seeds)
        split = {**preset.rl, **fam.rl}.get("train.eval_split", "test")
        shared = conf & set(sel["selection_seeds"])
        if shared or split == sel["selection_split"]:
            what = f"seed(s) {sorted(shared)}" if shared else f"the {split} split"
            raise ConfigError(
                f"{label}: the lr sweep and the confirmatory cells share {what}; "
                "the sweep must run on seeds and a split the confirmatory cells never use"
            )


def _base_cells(
    preset: TinyPreset, sft: dict, steps, seeds, arms_of, extra_rl: dict | None = None, start: int | None = None
) -> list[Cell]:
    """Cells of (base, name, variant, keys, extra axes) arms, per family and seed (seed outermost);
    START: the SFT start (sft.seed) they run from, an axis and a part of their names."""
    cells = []
    for label, fam in preset.families.items():
        rl = {**_family_rl(preset, fam, steps), **(extra_rl or {})}
        grid = {
            "base": preset.base_config,
            "overrides": {
                "rollout": fam.canvas,
                "eval": fam.canvas,
                **rl,
                "train.task": fam.task,
                "train.init": str(Path(sft[label]["folder"]) / "final"),
                "train.threads": 0,
            },
            "axes": {"train.task": [fam.task], "train.seed": list(seeds or fam.seeds or preset.seeds)},
        }
        arms = arms_of(rl)
        for cell in expand(grid, ROOT):
            for base, name, variant, keys, extra in arms:
                cfg = apply(apply(apply(cell.config, {"loss.base": base}), VARIANTS[variant]), keys)
                axes = {
                    "loss.base": base,
                    "train.task": fam.task,
                    "variant": name,
                    **({"sft_start": start} if start is not None else {}),
                    "train.seed": cell.axes["train.seed"],
                    **extra,
                }
                named = NAMED[:3] + (("sft_start",) if start is not None else ()) + NAMED[3:]
                cells.append(Cell("_".join(slug(k, axes[k]) for k in named), axes, cfg))
    return cells


def paper_cells(preset: PaperPreset, steps: int | None = None, seeds=None) -> list[Cell]:
    """Check every config's GPU and weights first (fail fast), then expand its grid."""
    from ...models import require_available

    cells = []
    for path in preset.configs:
        cfg = load_config(ROOT / path, [], RLConfig)
        require_available(cfg.model, cfg.train.require_gpu)
        grid = {
            "base": path,
            "overrides": {"train.steps": steps} if steps else {},
            "axes": {
                "loss.base": list(preset.bases),
                "train.task": [cfg.train.task],
                "variant": list(preset.variants),
                "train.seed": list(seeds or preset.seeds),
            },
        }
        cells += expand(grid, ROOT)
    return cells


def needs_sandbox(preset: TinyPreset | PaperPreset) -> bool:
    """Whether a preset has a code family (scored in the Docker sandbox)."""
    from ...registry import task_spec

    if isinstance(preset, TinyPreset):
        tasks = [f.task for f in preset.families.values()]
    else:
        tasks = [load_config(ROOT / p, [], RLConfig).train.task for p in preset.configs]
    return any(task_spec(t).family == "code" for t in tasks)


# ---- stage 3: what a reader keeps ------------------------------------------------------------
LIGHT = ("summary.json", "axes.json", "config.json", "metrics.jsonl", "eval.jsonl", "dps_examples.json", "error.txt")


def foreign_cells(out: Path, names: list[str]) -> list[str]:
    """The cells in OUT/cells (or packed in OUT/cells.parquet) that this grid would not write (another
    run's, or an earlier, larger grid's): publishing would delete them."""
    return sorted(c.name for c in cellstore.cells(out / "cells") if c.name not in set(names))


def check_output(out: Path, names: list[str]) -> None:
    """Refuse, before anything runs, an output folder whose cells/ holds cells this run does not
    write: `reproduce` never deletes cells it did not write."""
    other = foreign_cells(out, names)
    if other:
        raise ConfigError(
            f"{out}/cells holds {len(other)} cell(s) this run would not write (e.g. {other[0]}); "
            "publishing would replace them: give another --output-dir, or move them away"
        )


def copy_light(cells_dir: Path, names: list[str], light: Path) -> None:
    """LIGHT's files (no weights) of the named cells of CELLS_DIR into LIGHT, which holds only them."""
    shutil.rmtree(light, ignore_errors=True)
    for cell in sorted(cells_dir / name for name in names):
        for path in [cell / name for name in LIGHT] + sorted(cell.glob("eval-step*.jsonl")):  # a budget's evaluation
            if path.exists():
                (light / cell.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, light / cell.name / path.name)


def publish(cells_dir: Path, names: list[str], out: Path, meta: dict) -> tuple[str, list[Path]]:
    """Copy the small files (no weights) of this grid's cells to OUT/cells, then write the tables
    and plots there. OUT/cells holds only this grid's cells (check_output refused any other); a packed
    copy of earlier ones (OUT/cells.parquet) is removed: `daca-bench pack OUT --remove` packs the new ones."""
    from ..analysis.render import write_tables
    from ..figures.plots import plot_all

    check_output(out, names)
    light = out / "cells"
    cellstore.packed_path(light).unlink(missing_ok=True)
    copy_light(cells_dir, names, light)
    if (cells_dir / START).exists():
        shutil.copytree(cells_dir / START, light / START)
    out.mkdir(parents=True, exist_ok=True)  # config.json first: its preset_spec plans the table, as on a rebuild
    (out / "config.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    table, paths = write_tables(light)
    for p in paths:
        shutil.move(str(p), out / p.name)
    figures = plot_all(light)
    for p in figures:
        shutil.move(str(p), out / p.name)
    text = (out / "table.md").read_text()
    return text, [out / p.name for p in paths + figures]


def sft_markdown(sft: dict[str, dict]) -> str:
    """Each SFT start's own checks. Its test score is on the SFT's test prompts, which need not
    be the grid's (tiny-full scores on FULL_EVAL): the table's `start` row is the RL start."""
    lines = [
        "| family | task | SFT steps | dev exact % | test exact % (SFT's check) | test prompts |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, s in sft.items():
        lines.append(
            f"| {label} | {s['task']} | {s['steps']} | {100 * (s.get('dev_accuracy') or 0):.1f} | "
            f"{100 * s['accuracy']:.1f} | {s.get('n_eval', '')} |"
        )
    return "\n".join(lines) + "\n"
