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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..checkpoint import checkpoints
from ..config import RLConfig, RunConfig, apply, load_config, pick, to_dict
from .ablation import VARIANTS, expand, run_local, run_ray
from .jobs import Job, run_jobs

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Family:
    """One tiny family: its task and canvas length L, decoded in L/2 steps (two tokens per
    step, as d1 decodes 256 tokens in 128 steps) for SFT's dev checks, rollouts and evaluation."""
    task: str
    gen_length: int
    sft_steps: int = 2500  # at most; SFT stops at the first dev evaluation that reaches the target
    sft_eval_every: int = 0  # 0 = the preset's; finer where accuracy jumps (4x4 sudoku: 0 % to 66 % in 100 steps)

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
    variants: tuple = tuple(VARIANTS)
    sft_target: float = 0.10  # stop SFT at the first dev evaluation at or above this exact-match rate
    sft_eval_every: int = 100
    sft_dev: int = 128  # dev prompts (held out of the train split) for that check
    rl: dict = field(default_factory=dict)  # config overrides for every RL cell
    base_config: str = "configs/tiny.yaml"


@dataclass(frozen=True)
class PaperPreset:
    description: str
    configs: tuple  # RL presets under configs/paper
    seeds: tuple = (0,)
    bases: tuple = ("grpo", "gspo", "reinforce_pp")
    variants: tuple = tuple(VARIANTS)


FIVE = {  # in the order their SFT is started: the longest first, so two workers finish together
    "code": Family("python_tiny", 10),
    "json": Family("json_tiny", 28),
    "countdown": Family("countdown_tiny", 12),
    "math": Family("arithmetic", 4),
    "sudoku": Family("sudoku_tiny", 18, sft_eval_every=20),
}
PAPER_TASKS = ("gsm8k", "math500", "humaneval", "mbpp", "sudoku", "countdown", "json_schema")
PRESETS = {
    "tiny": TinyPreset("the embedded default: grpo x 4 variants x 5 tiny families x 2 seeds, 30 RL steps",
                       FIVE, rl_steps=30, rl={"train.lr": 1e-4}),
    "tiny-quick": TinyPreset("a first look: grpo x 4 variants x 3 tiny families x 2 seeds, 30 RL steps",
                             {k: FIVE[k] for k in ("countdown", "math", "sudoku")}, rl_steps=30, rl={"train.lr": 1e-4}),
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
                               "sft.target_accuracy": preset.sft_target, "sft.save_every": every})


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
    cells = []
    for label, fam in preset.families.items():
        start = str(Path(sft[label]["folder"]) / "final")
        grid = {"base": preset.base_config,
                "overrides": {"rollout": fam.canvas, "eval": fam.canvas, **preset.rl, "train.task": fam.task,
                              "train.steps": steps or preset.rl_steps, "train.init": start, "train.threads": 0},
                "axes": {"loss.base": list(preset.bases), "train.task": [fam.task], "variant": list(preset.variants),
                         "train.seed": list(seeds or preset.seeds)}}
        cells += expand(grid, ROOT)
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


# ---- stage 3: what a reader keeps ------------------------------------------------------------
LIGHT = ("summary.json", "axes.json", "config.json", "metrics.jsonl", "dps_examples.json", "error.txt")


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
    lines = ["| family | task | SFT steps | dev exact % | test exact % (the RL start) |", "|---|---|---:|---:|---:|"]
    for label, s in sft.items():
        lines.append(f"| {label} | {s['task']} | {s['steps']} | {100 * (s.get('dev_accuracy') or 0):.1f} | "
                     f"{100 * s['accuracy']:.1f} |")
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
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    parser.add_argument("--gpus-per-cell", type=float, default=1, help="GPUs per cell on Ray (paper presets)")
    parser.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    if args.list:
        for name, p in PRESETS.items():
            print(f"{name:18s} {p.description}")
        return 0
    preset = pick(PRESETS, args.preset, "--preset")
    out = Path(args.output_dir or f"results/{args.preset}")
    work = Path(args.work_dir or "runs/reproduce")
    progress = not args.no_progress
    t0 = time.perf_counter()
    meta = {"preset": args.preset, "command": " ".join(["daca-bench", *sys.argv[1:]]), "preset_spec": asdict(preset),
            "date": time.strftime("%Y-%m-%d %H:%M %Z")}
    sft = {}
    if isinstance(preset, TinyPreset):
        sft = run_sft(preset, work, args.workers, progress)
        print("SFT start points (dev = prompts held out of the train split):\n" + sft_markdown(sft))
        cells = tiny_cells(preset, sft, args.steps, args.seeds)
        meta["sft"] = sft
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
    for r in failed:
        print(f"FAILED {r['cell']}: {r.get('error')} (see {cells_dir / r['cell'] / 'error.txt'})")
    print(f"{len(results) - len(failed)}/{len(results)} cells in {meta['seconds'] / 60:.1f} min; "
          f"wrote {out}/ (table.md, table.csv, table.tex, plots, cells/, config.json)")
    return 1 if failed else 0

