"""`daca-bench reproduce`: the ablation end to end, from nothing to the table.

    daca-bench reproduce                        # the embedded default (tiny model, 2-core CPU): results/tiny
    daca-bench reproduce --preset tiny-quick    # a smaller grid for a first look
    daca-bench reproduce --preset llada-gsm8k   # paper scale: needs a CUDA GPU and the LLaDA weights
    daca-bench reproduce --list

A tiny preset (1) SFTs the tiny model on each synthetic family and stops at the first dev
evaluation (prompts held out of the train split) that reaches `sft_target`, so that RL starts
from a clearly imperfect model; these SFT runs are cached by their config; (2) runs the
grid base x {baseline, +DPS, +SML, +DACA} x family x seed; (3) writes the table, the plots, the
per-cell results and the config to the output folder and prints the table. A paper preset
checks the GPU and the weights before anything else, then runs its grid the same way.
Rerunning the command skips what is finished and resumes what is not.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..checkpoint import checkpoints
from ..config import ConfigError, RLConfig, RunConfig, apply, load_config, parse_overrides, pick, to_dict
from ..resources import data_dir
from .ablation import VARIANTS, Cell, slug, expand, run_local, run_ray
from .jobs import Job, run_jobs
from .readings import READINGS, write_picks
from .results import START

ROOT = data_dir("configs").parent  # the repository, or the installed package's _data folder


FOUR = ("baseline", "+DPS", "+SML", "+DACA")


@dataclass(frozen=True)
class Family:
    """One tiny family: its task and canvas length L, decoded in L/2 steps (two tokens per
    step, as d1 decodes 256 tokens in 128 steps) for SFT's dev checks, rollouts and evaluation."""
    task: str
    gen_length: int
    sft_steps: int = 2500  # at most; SFT stops at the first dev evaluation that reaches the target
    sft_eval_every: int = 0  # 0 = the preset's; finer where accuracy jumps (4x4 sudoku: 0 % to 66 % in 100 steps)
    sft_target: float = 0.0  # 0 = the preset's; higher where the SFT curve is gradual and RL needs more correct samples
    rl: dict = field(default_factory=dict)  # this family's RL overrides (steps, training reward, test prompts), over
    # the preset's; a preset's picks set train.lr after them
    seeds: tuple = ()  # this family's seeds instead of the preset's (more where its comparisons are seed-bound)

    @property
    def canvas(self) -> dict:
        return {"gen_length": self.gen_length, "block_length": self.gen_length, "steps": self.gen_length // 2}


@dataclass(frozen=True)
class TinyPreset:
    description: str
    families: dict  # family label -> Family
    rl_steps: int
    seeds: tuple = (0, 1)
    bases: tuple = ("grpo",)
    variants: tuple = FOUR
    sft_target: float = 0.10  # stop SFT at the first dev evaluation at or above this exact-match rate
    sft_eval_every: int = 100
    sft_dev: int = 128  # dev prompts (held out of the train split) for that check
    rl: dict = field(default_factory=dict)  # config overrides for every RL cell
    base_config: str = "configs/tiny.yaml"
    picks: dict = field(default_factory=dict)  # variant -> its picked reading's keys (readings.pick)
    readings: tuple = ()  # a readings sweep instead of variants: these READINGS at each of `lrs`
    lrs: tuple = ()


@dataclass(frozen=True)
class PaperPreset:
    description: str
    configs: tuple  # RL presets under configs/paper
    seeds: tuple = (0,)
    bases: tuple = ("grpo", "gspo", "reinforce_pp")
    variants: tuple = FOUR


DENSE = {"train.reward": "dense"}  # the family's partial credit for RL; the table stays exact match
# d1 masks 15 % of a long natural-language prompt; a tiny prompt carries its task in every
# character. Calibration on dev (docs/reproducing.md) kept it where the baseline moved with it
# (sudoku, math) and dropped it where it stalled RL (json: mean gradient norm 4.2 against 0.25).
NO_PROMPT_MASK = {"sml.p_mask_prompt": 0.0}
FIVE = {  # in the order their SFT is started: the longest first, so two workers finish together
    # SFT to 30 % dev (not 10 %): from 10 % the baseline of math and code moved less than their noise
    "code": Family("python_tiny", 10, sft_target=0.3, rl={**DENSE, **NO_PROMPT_MASK, "train.steps": 32}),
    "json": Family("json_tiny", 28, sft_target=0.3, rl={**DENSE, **NO_PROMPT_MASK, "train.steps": 32}),
    "countdown": Family("countdown_tiny", 12, rl={**DENSE, "train.steps": 60}),
    "math": Family("arithmetic_tiny", 4, sft_target=0.3, rl={**DENSE, "train.steps": 64}),
    "sudoku": Family("sudoku_tiny", 18, sft_eval_every=20, rl={**DENSE, "train.steps": 32}),
}
FULL = ("code", "json", "math", "sudoku")  # one family per area of the paper (countdown: tiny-confirm)
# tiny-full scores on more test prompts than the default's 256. Its baseline-vs-start rows are
# paired by prompt, and with 256 the prompt variance alone put json's MDE at 6.4 pp and code's at
# 4.1 (results/tiny-full, first run); the interval shrinks with the square root of the prompts,
# and an evaluation is 1-5 % of a cell (BENCHMARKS.md). arithmetic_tiny's test split holds 510.
FULL_EVAL = {"code": 768, "json": 1024, "math": 510, "sudoku": 512}


def full_family(label: str) -> Family:
    """FIVE's family with tiny-full's test-set size (its canvas and SFT start unchanged)."""
    return replace(FIVE[label], rl={**FIVE[label].rl, "train.n_eval": FULL_EVAL[label]})


# tiny-full where every bar of its issue holds (results/README.md): sudoku's variant rows are
# seed-bound (MDE 8.1 with 8 seeds, at most 4.4 with 16: results/tiny-full-sudoku16) and code's
# baseline needs 64 steps to move past its MDE (results/tiny-full-code64). Its cells are tiny-full's
# where the two agree, so the three committed runs are its parts: about 115 min on 2 cores.
POWERED = {**{f: full_family(f) for f in FULL},
           "code": replace(full_family("code"), rl={**full_family("code").rl, "train.steps": 64}),
           "sudoku": replace(full_family("sudoku"), seeds=tuple(range(16)))}


# the math family before arithmetic_tiny (2-3 operands: its SFT stalled near 6 %); the committed
# estimator study (docs/estimators.md) ran on it, so its canvas and SFT start stay findable
EARLIER = {"arithmetic": Family("arithmetic", 4)}


def family_of(task: str) -> Family | None:
    """The tiny family (canvas, SFT budget) of a task, or None."""
    return next((f for f in FIVE.values() if f.task == task), None) or EARLIER.get(task)


# The regime every tiny cell trains in (docs/reproducing.md, "The regime"): d1's shape at the
# lowest mu at which the importance ratio acts (the second inner update sees a moved policy),
# d1's prompt masking and KL, and PPO's / TRL's clip 0.2 (d1's 0.5 never clipped at these lrs).
REGIME = {"train.mu": 2, "sml.p_mask_prompt": 0.15, "loss.beta": 0.04, "loss.epsilon": 0.2}
TINY_RL = {**REGIME, "train.lr": 5e-5, "train.n_eval": 256, "train.test_seed": 0}
PAPER_TASKS = ("gsm8k", "math500", "humaneval", "mbpp", "sudoku", "countdown", "json_schema")
SELECTION_SEEDS = (100, 101)  # the readings sweep's seeds: never used by a confirmatory table
# What `tiny-readings` picked (results/tiny-readings/picks.json; a test keeps the two in step).
PICKS = {
    'baseline': {'reading': 'baseline', 'train.lr': 0.0001},
    '+DPS': {'reading': '+DPS:progress', 'train.lr': 0.0001, 'dps.score': 'progress', 'dps.norm': 'rank'},
    '+SML': {'reading': '+SML:causal', 'train.lr': 0.0001, 'sml.partition': 'causal', 'sml.k': 4},
    '+DACA': {'reading': '+DPS:progress with +SML:causal', 'train.lr': 0.0001, 'dps.score': 'progress', 'dps.norm': 'rank', 'sml.partition': 'causal', 'sml.k': 4},
    '+DPS-random': {'reading': '+DPS:random', 'train.lr': 0.0001, 'dps.score': 'random', 'dps.norm': 'rank'},
}
CONFIRM = FOUR + ("+DPS-random",)
PRESETS = {
    "tiny": TinyPreset("the embedded default: the confirmatory sudoku table, grpo x {baseline, +DPS, +SML, +DACA, "
                       "+DPS-random} x 8 seeds in the d1-like regime with the readings tiny-readings picked",
                       {"sudoku": FIVE["sudoku"]}, rl_steps=32, seeds=tuple(range(8)), rl=TINY_RL,
                       variants=CONFIRM, picks=PICKS),
    "tiny-confirm": TinyPreset("the confirmatory table on sudoku and countdown (tiny's cells plus countdown's)",
                               {"sudoku": FIVE["sudoku"], "countdown": FIVE["countdown"]}, rl_steps=32,
                               seeds=tuple(range(8)), rl=TINY_RL, variants=CONFIRM, picks=PICKS),
    "tiny-readings": TinyPreset("the readings sweep: every DPS / SML reading and the random control at 2 lrs, "
                                "selection seeds 100-101, scored on the dev split; writes picks.json",
                                {"sudoku": FIVE["sudoku"]}, rl_steps=32, seeds=SELECTION_SEEDS,
                                rl={**TINY_RL, "train.eval_split": "dev"}, readings=tuple(READINGS),
                                lrs=(5e-5, 1e-4)),
    "tiny-quick": TinyPreset("a first look: the default's variants x sudoku x 2 seeds",
                             {"sudoku": FIVE["sudoku"]}, rl_steps=32, seeds=(0, 1), rl=TINY_RL, variants=CONFIRM,
                             picks=PICKS),
    "tiny-full": TinyPreset("every area of the paper: grpo x 4 variants x {code, json, math, sudoku} x 8 seeds "
                            "(about 90 min on 2 cores; --executor ray on more)", {f: full_family(f) for f in FULL},
                            rl_steps=32, seeds=tuple(range(8)), rl=TINY_RL, picks=PICKS),
    "tiny-full-powered": TinyPreset("tiny-full with every MDE under 6 pp and every baseline past its MDE: sudoku "
                                    "x 16 seeds, code x 64 steps (about 115 min on 2 cores)", POWERED, rl_steps=32,
                                    seeds=tuple(range(8)), rl=TINY_RL, picks=PICKS),
    **{f"llada-{t.replace('_', '-')}": PaperPreset(f"LLaDA-8B-Instruct on {t}, 3 base methods x 4 variants (d1 protocol)",
                                                   (f"configs/paper/llada_{t}.yaml",)) for t in PAPER_TASKS},
    "paper": PaperPreset("every paper-scale task: LLaDA-8B-Instruct, 3 base methods x 4 variants",
                         tuple(f"configs/paper/llada_{t}.yaml" for t in PAPER_TASKS)),
}


# ---- stage 1: SFT per family, cached by config --------------------------------------------
def sft_config(preset: TinyPreset, fam: Family) -> RunConfig:
    every = fam.sft_eval_every or preset.sft_eval_every
    return apply(RunConfig(), {"sampler": fam.canvas, "sft.task": fam.task, "sft.steps": fam.sft_steps,
                               "sft.eval_every": every, "sft.n_dev": preset.sft_dev,
                               "sft.target_accuracy": fam.sft_target or preset.sft_target, "sft.save_every": every})


def sft_folder(work: Path, cfg: RunConfig) -> Path:
    from ..registry import task_spec

    key = json.dumps({**to_dict(cfg), "task_version": task_spec(cfg.sft.task).version}, sort_keys=True)
    return work / "sft" / f"{cfg.sft.task}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def _sft_job(cfg: RunConfig, folder: str) -> dict:
    from ..rl.sft import train_sft

    done = Path(folder) / "summary.json"
    if done.exists():
        return {**json.loads(done.read_text()), "status": "cached"}
    return {**train_sft(cfg, folder, resume=bool(checkpoints(folder)), progress=False), "status": "done"}


def run_sft(preset: TinyPreset, work: Path, workers: int, progress: bool) -> dict[str, dict]:
    jobs = []
    for label, fam in preset.families.items():
        cfg = sft_config(preset, fam)
        folder = sft_folder(work, cfg)
        cost = cfg.sft.batch_size * (cfg.sampler.gen_length + 32)  # canvases x (completion + a typical prompt)
        jobs.append(Job(label, _sft_job, (cfg, str(folder)), folder, cfg.sft.steps, cost))
    results = run_jobs(jobs, workers, desc="1/2 SFT per family", progress=progress, left="left at most")
    out = {}
    for job, r in zip(jobs, results):
        if r.get("status") == "failed" or "accuracy" not in r:
            raise RuntimeError(f"SFT of {job.name} ({job.folder}) failed: {r.get('error')}")
        out[job.name] = {**r, "folder": str(job.folder)}
    return out


# ---- stage 2: the grid ----------------------------------------------------------------------
def tiny_cells(preset: TinyPreset, sft: dict[str, dict], steps: int | None = None, seeds=None):
    """The grid. Common random numbers: the cells of one seed share the SFT start, the train
    prompts and their order, the rollout noise and the SML masks (all keyed by train.seed), and
    every cell of a family is scored on one evaluation set (train.test_seed, train.eval_split), so
    that variants differ only where the method differs. A readings sweep has one cell per
    (reading, lr) instead of per variant."""
    from .readings import overrides, reading_name

    if preset.readings:
        arms = [(reading_name(r, lr, preset.lrs[0]), READINGS[r][1], {**READINGS[r][2], "train.lr": lr},
                 {"reading": r, "train.lr": lr}) for r in preset.readings for lr in preset.lrs]
    else:
        arms = [(v, v, overrides(preset.picks, v), {}) for v in preset.variants]
    cells = []
    for label, fam in preset.families.items():
        start = str(Path(sft[label]["folder"]) / "final")
        rl = {"train.steps": preset.rl_steps, **preset.rl, **fam.rl}
        if steps:
            rl["train.steps"] = steps
        grid = {"base": preset.base_config,
                "overrides": {"rollout": fam.canvas, "eval": fam.canvas, **rl, "train.task": fam.task,
                              "train.init": start, "train.threads": 0},
                "axes": {"loss.base": list(preset.bases), "train.task": [fam.task],
                         "train.seed": list(seeds or fam.seeds or preset.seeds)}}
        for cell in expand(grid, ROOT):
            for name, variant, keys, extra in arms:
                cfg = apply(apply(cell.config, VARIANTS[variant]), keys)
                axes = {"loss.base": cell.axes["loss.base"], "train.task": fam.task, "variant": name,
                        "train.seed": cell.axes["train.seed"], **extra}
                cells.append(Cell("_".join(slug(k, axes[k]) for k in ("loss.base", "train.task", "variant", "train.seed")),
                                  axes, cfg))
    return cells


def paper_cells(preset: PaperPreset, steps: int | None = None, seeds=None):
    """Check every config's GPU and weights first (fail fast), then expand its grid."""
    from ..models import require_available

    cells = []
    for path in preset.configs:
        cfg = load_config(ROOT / path, [], RLConfig)
        require_available(cfg.model, cfg.train.require_gpu)
        grid = {"base": path, "overrides": {"train.steps": steps} if steps else {},
                "axes": {"loss.base": list(preset.bases), "train.task": [cfg.train.task],
                         "variant": list(preset.variants), "train.seed": list(seeds or preset.seeds)}}
        cells += expand(grid, ROOT)
    return cells


def evaluate_starts(cells, folder: Path) -> dict[str, float]:
    """The RL start (each family's SFT model) scored once on its family's test set, with the
    cells' evaluation canvas: FOLDER/start/<task>/eval.jsonl, the reference of the baseline's gain."""
    from ..registry import get_task
    from ..rl.evaluate import evaluate, write_eval_records
    from ..rl.policy import load_initial

    out = {}
    for cfg in {c.config.train.task: c.config for c in cells}.values():
        t = cfg.train
        target = folder / START / t.task
        key = json.dumps({"init": t.init, "test_seed": t.test_seed, "n_eval": t.n_eval, "eval": to_dict(cfg.eval),
                          "split": t.eval_split}, sort_keys=True)
        done = json.loads((target / "summary.json").read_text()) if (target / "summary.json").exists() else {}
        if done.get("key") == key:
            out[t.task] = done["test_accuracy"]
            continue
        target.mkdir(parents=True, exist_ok=True)
        result = evaluate(load_initial(cfg), get_task(t.task, split=t.eval_split, n=t.n_eval, seed=t.test_seed), cfg.eval,
                          n=t.n_eval)
        write_eval_records(target / "eval.jsonl", result)
        (target / "summary.json").write_text(json.dumps({"task": t.task, "test_accuracy": result["accuracy"],
                                                         "statuses": result["statuses"], "key": key}) + "\n")
        out[t.task] = result["accuracy"]
    return out


# ---- stage 3: what a reader keeps ------------------------------------------------------------
LIGHT = ("summary.json", "axes.json", "config.json", "metrics.jsonl", "eval.jsonl", "dps_examples.json", "error.txt")


def publish(cells_dir: Path, names: list[str], out: Path, meta: dict) -> tuple[str, list[Path]]:
    """Copy the small files (no weights) of this grid's cells to OUT/cells (not those an earlier,
    larger grid left in the same folder), then write the tables and plots there."""
    from .plots import plot_all
    from .results import write_tables

    light = out / "cells"
    shutil.rmtree(light, ignore_errors=True)
    for cell in sorted(cells_dir / name for name in names):
        for name in LIGHT:
            if (cell / name).exists():
                (light / cell.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(cell / name, light / cell.name / name)
    if (cells_dir / START).exists():
        shutil.copytree(cells_dir / START, light / START)
    table, paths = write_tables(light)
    for p in paths:
        shutil.move(str(p), out / p.name)
    figures = plot_all(light)
    for p in figures:
        shutil.move(str(p), out / p.name)
    (out / "config.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    text = (out / "table.md").read_text()
    return text, [out / p.name for p in paths + figures]


def sft_markdown(sft: dict[str, dict]) -> str:
    """Each SFT start's own checks. Its test score is on the SFT's test prompts, which need not
    be the grid's (tiny-full scores on FULL_EVAL): the table's `start` row is the RL start."""
    lines = ["| family | task | SFT steps | dev exact % | test exact % (SFT's check) | test prompts |",
             "|---|---|---:|---:|---:|---:|"]
    for label, s in sft.items():
        lines.append(f"| {label} | {s['task']} | {s['steps']} | {100 * (s.get('dev_accuracy') or 0):.1f} | "
                     f"{100 * s['accuracy']:.1f} | {s.get('n_eval', '')} |")
    return "\n".join(lines) + "\n"


# ---- CLI -------------------------------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("--preset", default="tiny", help="tiny (default), tiny-quick, paper, llada-TASK; --list shows all")
    parser.add_argument("--list", action="store_true", help="list the presets and stop")
    parser.add_argument("--output-dir", default=None, help="tables, plots and per-cell results (default results/PRESET)")
    parser.add_argument("--work-dir", default=None, help="SFT runs and full cell folders (default runs/reproduce)")
    parser.add_argument("--workers", type=int, default=0, help="parallel processes (default: one per core)")
    parser.add_argument("--steps", type=int, default=None, help="RL steps per cell (default: the preset's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: the preset's)")
    parser.add_argument("--families", nargs="+", default=None,
                        help="run only these families of a tiny preset (e.g. tiny-full's first families)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    parser.add_argument("--gpus-per-cell", type=float, default=1, help="GPUs per cell on Ray (paper presets)")
    parser.add_argument("--calibrate", metavar="FAMILY", default=None,
                        help="instead of the grid: FAMILY's learning curve over --lrs and --variants (one seed)")
    parser.add_argument("--lrs", type=float, nargs="+", default=[2e-5, 5e-5, 1e-4], help="learning rates to calibrate")
    parser.add_argument("--variants", nargs="+", default=["baseline"], help="variants to calibrate")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="with --calibrate: override the family's RL config (e.g. train.reward=exact train.steps=64)")
    parser.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    if args.list:
        for name, p in PRESETS.items():
            print(f"{name:18s} {p.description}")
        return 0
    preset = pick(PRESETS, args.preset, "--preset")
    if args.families:
        if not isinstance(preset, TinyPreset):
            raise ConfigError("--families works on the tiny presets")
        preset = replace(preset, families={f: pick(preset.families, f, "--families") for f in args.families})
    out = Path(args.output_dir or f"results/{args.preset}")
    work = Path(args.work_dir or "runs/reproduce")
    progress = not args.no_progress
    if args.set and not args.calibrate:
        raise ConfigError("--set works with --calibrate (a preset's grid takes its config from PRESETS)")
    if args.calibrate:
        if not isinstance(preset, TinyPreset):
            raise ConfigError("--calibrate works on the tiny presets")
        sets = parse_overrides(args.set)  # KEY=VALUE, as every command's overrides
        from .calibrate import calibrate

        print(calibrate(preset, args.calibrate, args.lrs, args.variants, args.steps, args.seeds, work, args.workers,
                        progress, sets))
        return 0
    t0 = time.perf_counter()
    meta = {"preset": args.preset, "command": " ".join(["daca-bench", *sys.argv[1:]]), "preset_spec": asdict(preset),
            "date": time.strftime("%Y-%m-%d %H:%M %Z")}
    sft = {}
    if isinstance(preset, TinyPreset):
        sft = run_sft(preset, work, args.workers, progress)
        print("SFT start points (dev = prompts held out of the train split):\n" + sft_markdown(sft))
        cells = tiny_cells(preset, sft, args.steps, args.seeds)
        meta["sft"] = sft
        meta["start"] = evaluate_starts(cells, work / args.preset)
    else:
        try:
            cells = paper_cells(preset, args.steps, args.seeds)
        except RuntimeError as exc:
            print(f"daca-bench reproduce --preset {args.preset}: {exc}", file=sys.stderr)
            return 2
    cells_dir = work / args.preset
    if args.executor == "ray":
        gpus = args.gpus_per_cell if isinstance(preset, PaperPreset) else 0
        results = run_ray(cells, cells_dir, args.address, 1, gpus, progress=progress)
    else:
        results = run_local(cells, cells_dir, args.workers, desc="2/2 RL grid", progress=progress)
    meta["cells"] = {c.name: to_dict(c.config) for c in cells[:1]}  # one resolved cell; the rest differ by axes
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    failed = [r for r in results if r["status"] == "failed"]
    out.mkdir(parents=True, exist_ok=True)
    text, paths = publish(cells_dir, [c.name for c in cells], out, meta)
    if sft:
        (out / "sft.md").write_text(sft_markdown(sft))
    print(text)
    if isinstance(preset, TinyPreset) and preset.readings:
        picks = write_picks(out / "cells", out)["picks"]
        print("picked by the rule in daca_bench/experiments/readings.py (written to picks.json):")
        for variant, p in picks.items():
            print(f"  {variant:12s} {p['reading']} at lr {p['train.lr']:g}")
    for r in failed:
        print(f"FAILED {r['cell']}: {r.get('error')} (see {cells_dir / r['cell'] / 'error.txt'})")
    print(f"{len(results) - len(failed)}/{len(results)} cells in {meta['seconds'] / 60:.1f} min; "
          f"wrote {out}/ (table.md, table.csv, table.tex, plots, cells/, config.json)")
    return 1 if failed else 0

