"""`daca-bench reproduce`: the ablation end to end, from nothing to the table (the command; the
presets are data in experiments/grid/presets.py, the stages functions in experiments/grid/pipeline.py).

    daca-bench reproduce                        # the embedded default (tiny model, 2-core CPU): runs/tiny-DATE
    daca-bench reproduce --preset tiny-quick    # a smaller grid for a first look
    daca-bench reproduce --preset tiny-bases    # every base and the field's methods, after an lr sweep on dev
    daca-bench reproduce --preset llada-gsm8k   # paper scale: needs a CUDA GPU and the LLaDA weights
    daca-bench reproduce --list

A tiny preset (1) SFTs the tiny model on each synthetic family and stops at the first dev
evaluation (prompts held out of the train split) that reaches `sft_target`, so that RL starts
from a clearly imperfect model; these SFT runs are cached by their config; (2) runs the
grid base x {baseline, +DPS, +SML, +DACA} x family x seed; (3) writes the table, the plots, the
per-cell results and the config to the output folder (a folder of its own: never the committed
reference it is compared with) and prints the table. A confirmatory preset first writes its
design.json there and refuses a dirty checkout. A per-base preset (`tiny-bases`) runs an lr
sweep on dev between (1) and (2) and writes its picks to picks.json before its first
confirmatory cell; `--bases` runs some of a preset's bases. A paper preset checks the GPU and
the weights before anything else. Rerunning the command skips what is finished and resumes what is not.
"""

from __future__ import annotations

import difflib
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from ...config import ConfigError, parse_overrides, pick, to_dict
from .ablation import evaluate_starts, stamp_cells
from .executors import run_local, run_ray
from .pipeline import (
    ROOT,
    check_disjoint,
    check_output,
    copy_light,
    needs_sandbox,
    paper_cells,
    publish,
    run_sft,
    selection_cells,
    sft_markdown,
    tiny_cells,
)
from .presets import PRESETS, Family, PaperPreset, TinyPreset, comparisons
from .provenance import check_tree, code_tree, describe


def configure(parser) -> None:
    parser.add_argument(
        "--preset", default="tiny", help="tiny (default), tiny-quick, paper, llada-TASK; --list shows all"
    )
    parser.add_argument("--list", action="store_true", help="list the presets and stop")
    parser.add_argument(
        "--output-dir",
        default=None,
        help="tables, plots and per-cell results (default runs/PRESET-DATE, a folder of its own)",
    )
    parser.add_argument("--work-dir", default=None, help="SFT runs and full cell folders (default runs/reproduce)")
    parser.add_argument("--workers", type=int, default=0, help="parallel processes (default: one per core)")
    parser.add_argument("--steps", type=int, default=None, help="RL steps per cell (default: the preset's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: the preset's)")
    parser.add_argument(
        "--families",
        nargs="+",
        default=None,
        help="run only these families of a tiny preset (e.g. tiny-full's first families)",
    )
    parser.add_argument(
        "--bases",
        nargs="+",
        default=None,
        help="run only these base methods of a tiny preset (e.g. tiny-bases' grpo and wd1)",
    )
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    parser.add_argument("--gpus-per-cell", type=float, default=1, help="GPUs per cell on Ray (paper presets)")
    parser.add_argument(
        "--calibrate",
        metavar="FAMILY",
        default=None,
        help="instead of the grid: FAMILY's learning curve over --lrs and --variants (one seed, dev split)",
    )
    parser.add_argument("--lrs", type=float, nargs="+", default=[2e-5, 5e-5, 1e-4], help="learning rates to calibrate")
    parser.add_argument("--variants", nargs="+", default=["baseline"], help="variants to calibrate")
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="with --calibrate: override the family's RL config (e.g. train.reward=exact train.steps=64)",
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run a confirmatory preset from a checkout with uncommitted changes (recorded in each cell)",
    )
    parser.add_argument(
        "--design-only",
        action="store_true",
        help="write a confirmatory preset's design.json to --output-dir and run nothing (to commit first)",
    )
    parser.add_argument(
        "--needs-docker",
        action="store_true",
        help="print yes or no: whether the preset (and --families) has a code family, then stop",
    )
    parser.add_argument("--no-progress", action="store_true")


def default_output(preset: str) -> Path:
    """A run's own folder (runs/ is git-ignored): never the committed results/PRESET it is compared with."""
    return Path("runs") / f"{preset}-{time.strftime('%Y-%m-%d')}"


def _preset(args):
    preset = pick(PRESETS, args.preset, "--preset")
    if args.families:
        if not isinstance(preset, TinyPreset):
            raise ConfigError("--families works on the tiny presets")
        preset = replace(
            preset, families={f: preset.families.get(f) or task_family(f, preset, args.preset) for f in args.families}
        )
    if args.steps and getattr(preset, "arms", "").startswith("compute"):  # its arms and comparisons are named by budget
        preset = replace(preset, rl_steps=args.steps)
    if args.bases:
        if not isinstance(preset, TinyPreset):
            raise ConfigError("--bases works on the tiny presets")
        known = {b: b for b in preset.bases}
        chosen = {pick(known, b, "--bases") for b in args.bases}
        preset = replace(preset, bases=tuple(b for b in preset.bases if b in chosen))
    return preset


def task_family(name: str, preset: TinyPreset, label: str) -> Family:
    """`--families NAME` where NAME is no family of the preset but a registered tiny task (one of your
    own, with --tasks-dir): a family of its own, its canvas the longest gold answer of its train and
    test splits plus EOS (even, decoded two tokens a step), trained on exact-match rewards."""
    from ...errors import UnknownTaskError
    from ...registry import task_spec

    try:
        spec = task_spec(name)
    except UnknownTaskError:
        close = difflib.get_close_matches(name, list(preset.families), n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ConfigError(
            f"--families {name!r}: {hint}neither a "
            f"family of {label} ({', '.join(preset.families)}) nor a registered task; a task of your own: "
            "--tasks-dir DIR (the folder of its file) or DACA_BENCH_TASKS=DIR"
        ) from None
    if not spec.tiny:
        raise ConfigError(
            f"--families {name}: the tiny presets train the tiny character model, and {name} is not a "
            "tiny task (register_task(..., tiny=True): ASCII prompts <= 64 characters, gold <= 48)"
        )
    golds = [
        s.target or ""
        for split in ("train", "test")
        if split in spec.splits
        for s in spec.build(split=split, n=256).samples
    ]
    length = max(map(len, golds), default=1) + 1  # and EOS
    return Family(name, length + length % 2)


SWEEP = "selection"  # a per-base preset's lr sweep: OUT/selection/cells (dev split), its picks in OUT/picks.json


def _execute(cells, cells_dir: Path, args, paper: bool, desc: str, progress: bool) -> list[dict]:
    if args.executor == "ray":
        return run_ray(cells, cells_dir, args.address, 1, args.gpus_per_cell if paper else 0, progress=progress)
    return run_local(cells, cells_dir, args.workers, desc=desc, progress=progress)


def sweep(preset: TinyPreset, sft: dict, args, work: Path, out: Path, code: tuple, progress: bool) -> dict | None:
    """A per-base preset's lr sweep: run (or resume) its cells, copy their small files to
    OUT/selection/cells, pick by the design's rule into OUT/picks.json; the picks, or None when a
    cell failed (nothing confirmatory runs on a partial sweep)."""
    from .bases_grid import edge_extensions, write_picks

    cells = stamp_cells(selection_cells(preset, sft, args.steps), *code)
    cells_dir = work / f"{args.preset}-{SWEEP}"
    results = _execute(cells, cells_dir, args, False, "2/3 lr sweep on dev", progress)
    copy_light(cells_dir, [c.name for c in cells], out / SWEEP / "cells")
    failed = [r for r in results if r["status"] == "failed"]
    for r in failed:
        print(f"FAILED {r['cell']}: {r.get('error')} (see {cells_dir / r['cell'] / 'error.txt'})")
    if failed:
        print(f"the lr sweep has {len(failed)} failed cell(s); nothing confirmatory ran: rerun to resume")
        return None
    result = write_picks(cells_dir, out, preset.selection, preset.selection["selection_seeds"])
    beyond = edge_extensions(result["picks"], preset.selection)  # an edge pick: one lr past it, then pick again
    if beyond:
        more = stamp_cells(selection_cells(preset, sft, args.steps, beyond), *code)
        print(f"{len(beyond)} pick(s) on an edge of the lr grid: the sweep runs one step beyond it ({len(more)} cells)")
        results = _execute(more, cells_dir, args, False, "2/3 lr sweep, past its edges", progress)
        copy_light(cells_dir, [c.name for c in more], out / SWEEP / "cells")
        if any(r["status"] == "failed" for r in results):
            print("a cell past the lr grid's edge failed; nothing confirmatory ran: rerun to resume")
            return None
        result = write_picks(cells_dir, out, preset.selection, preset.selection["selection_seeds"], beyond)
    print(f"picked by the design's rule on {preset.selection['selection_split']} (written to {out / 'picks.json'}):")
    for base, rows in result["picks"].items():
        print(
            "  "
            + base
            + ": "
            + ", ".join(
                f"{row} " + " ".join(f"{k.split('.')[-1]} {v:g}" for k, v in keys.items()) for row, keys in rows.items()
            )
        )
    return result["picks"]


def design_only(args, preset, out: Path, code: str, tree: str) -> int:
    """`--design-only`: write the confirmatory preset's design.json to OUT and run nothing (the file
    to commit before the run: the preset's `design`)."""
    from ..analysis.design import write_design
    from .preregister import design_of

    if not (isinstance(preset, TinyPreset) and preset.confirmatory):
        raise ConfigError(f"--design-only writes a confirmatory tiny preset's design; {args.preset} is not one")
    planned = tiny_cells(preset, {f: {"folder": ""} for f in preset.families}, args.steps, args.seeds)
    path = write_design(out, design_of(args.preset, preset, planned, code, tree))
    print(f"wrote {path}: commit it before the run" + (f" (the preset reads {preset.design})" if preset.design else ""))
    return 0


def committed_label(folder: Path) -> str:
    """How `daca-bench table` labels a committed results folder (its table.md's first word), or '-'."""
    try:
        first = (folder / "table.md").read_text(encoding="utf-8").split("\n", 1)[0]
    except OSError:
        return "-"
    return first.split("**")[1].lower() if first.startswith("**") and first.count("**") >= 2 else "-"


def preset_listing() -> str:
    """`reproduce --list`: each preset, what a run of it is (confirmatory where it registers design.json
    before its first cell, else exploratory), how the table labels its committed results/ folder, and
    its description; the labels come from the code and the tables, never from the description's words."""
    rows = [("preset", "a run is", "results/PRESET", "description")]
    for name, p in PRESETS.items():
        rows.append(
            (
                name,
                "confirmatory" if getattr(p, "confirmatory", False) else "exploratory",
                committed_label(ROOT / "results" / name),
                p.description,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in rows]
    return "\n".join(
        lines
        + [
            "",
            "a run is confirmatory where it registers design.json before its first cell; "
            "results/PRESET: how `daca-bench table` labels the committed folder (- where there "
            "is none; a folder run before designs existed is exploratory)",
        ]
    )


def run(args) -> int:
    if args.list:
        print(preset_listing())
        return 0
    preset = _preset(args)
    if args.needs_docker:
        print("yes" if needs_sandbox(preset) else "no")
        return 0
    work = Path(args.work_dir or "runs/reproduce")
    progress = not args.no_progress
    if args.set and not args.calibrate:
        raise ConfigError("--set works with --calibrate (a preset's grid takes its config from PRESETS)")
    if args.calibrate:
        if not isinstance(preset, TinyPreset):
            raise ConfigError("--calibrate works on the tiny presets")
        from .calibrate import calibrate

        print(
            calibrate(
                preset,
                args.calibrate,
                args.lrs,
                args.variants,
                args.steps,
                args.seeds,
                work,
                args.workers,
                progress,
                parse_overrides(args.set),
            )
        )  # --set reads KEY=VALUE as every command's overrides
        return 0
    out = Path(args.output_dir) if args.output_dir else default_output(args.preset)
    code, tree = describe(), code_tree()  # once, before any worker imports the package: the code every cell runs
    check_tree(code, preset.confirmatory, args.allow_dirty, f"reproduce --preset {args.preset}")
    if args.design_only:
        return design_only(args, preset, out, code, tree)
    t0 = time.perf_counter()
    spec = {**asdict(preset), **({"comparisons": comparisons(preset)} if isinstance(preset, TinyPreset) else {})}
    meta = {
        "preset": args.preset,
        "command": " ".join(["daca-bench", *sys.argv[1:]]),
        "preset_spec": spec,
        "git": code,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }
    sft = {}
    if isinstance(preset, TinyPreset):
        nowhere = {f: {"folder": ""} for f in preset.families}
        planned = tiny_cells(preset, nowhere, args.steps, args.seeds)
        check_output(out, [c.name for c in planned])  # before anything runs: never over another run's cells
        if preset.arms == "bases":  # the lr sweep: on seeds and a split the confirmatory cells never use
            check_disjoint(preset, args.seeds)
            check_output(out / SWEEP, [c.name for c in selection_cells(preset, nowhere, args.steps)])
        if preset.confirmatory:
            from .preregister import design_of, register

            committed = ROOT / preset.design if preset.design else None
            path, how = register(out, design_of(args.preset, preset, planned, code, tree), committed)
            print(f"design registered before the first cell: {path} ({how})")
        sft = run_sft(preset, work, args.workers, progress)
        print("SFT start points (dev = prompts held out of the train split):\n" + sft_markdown(sft))
        picks = sweep(preset, sft, args, work, out, (code, tree), progress) if preset.arms == "bases" else None
        if preset.arms == "bases" and picks is None:
            return 1
        cells = tiny_cells(preset, sft, args.steps, args.seeds, picks)
        meta["sft"] = sft
        meta["start"] = evaluate_starts(cells, work / args.preset)
    else:
        try:
            cells = paper_cells(preset, args.steps, args.seeds)
        except RuntimeError as exc:
            print(f"daca-bench reproduce --preset {args.preset}: {exc}", file=sys.stderr)
            return 2
        check_output(out, [c.name for c in cells])
    cells = stamp_cells(cells, code, tree)
    cells_dir = work / args.preset
    desc = "3/3 confirmatory grid" if getattr(preset, "arms", "") == "bases" else "2/2 RL grid"
    results = _execute(cells, cells_dir, args, isinstance(preset, PaperPreset), desc, progress)
    meta["cells"] = {c.name: to_dict(c.config) for c in cells[:1]}  # one resolved cell; the rest differ by axes
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    failed = [r for r in results if r["status"] == "failed"]
    out.mkdir(parents=True, exist_ok=True)
    text, paths = publish(cells_dir, [c.name for c in cells], out, meta)
    if sft:
        (out / "sft.md").write_text(sft_markdown(sft))
    print(text)
    if isinstance(preset, TinyPreset) and preset.readings:
        from .readings import write_picks

        picks = write_picks(out / "cells", out)["picks"]
        print("picked by the rule in daca_bench/experiments/grid/readings.py (written to picks.json):")
        for variant, p in picks.items():
            print(f"  {variant:12s} {p['reading']} at lr {p['train.lr']:g}")
    for r in failed:
        print(f"FAILED {r['cell']}: {r.get('error')} (see {cells_dir / r['cell'] / 'error.txt'})")
    print(
        f"{len(results) - len(failed)}/{len(results)} cells in {meta['seconds'] / 60:.1f} min; "
        f"wrote {out}/ (table.md, table.csv, table.tex, plots, cells/, config.json)"
    )
    reference = ROOT / "results" / args.preset
    if (reference / "table.csv").exists() and reference.resolve() != out.resolve():
        print(f"did it replicate the committed table? daca-bench table {out} --against results/{args.preset}")
    return 1 if failed else 0
