"""Carry an unfinished `daca-bench reproduce` grid from one machine to the next through git: a grid longer
than a session is run in parts, every part from the same committed design, SFT starts and code tree.

    python scripts/carry_run.py save tiny-block      # runs/reproduce -> results/tiny-block/unfinished/
    python scripts/carry_run.py restore tiny-block   # results/tiny-block/unfinished/ -> runs/reproduce
    daca-bench reproduce --preset tiny-block --output-dir results/tiny-block   # skips what the part finished

`save` packs the finished cells and the RL start's records (cellstore's Parquet: every file byte for byte)
and copies each SFT start the cells train from (its records and final/ weights, no checkpoints), with
the sha256 of each weights file. `restore` writes them back where `reproduce` looks (a file already there
must be the same) and checks the weights' hashes: the next part trains from the very weights the first did,
whatever the new machine's SFT would give. Only whole seeds are carried (every arm of a task and seed finished):
cells differ across CPUs from step 1, so a seed's arms, which the table pairs, run on one machine; an unfinished
cell and the finished cells of its seed run again on the next machine.
Run the next part from a checkout with the design's code tree (`git worktree add DIR <commit>`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from daca_bench.errors import ConfigError  # noqa: E402
from daca_bench.experiments.analysis import cellstore  # noqa: E402
from daca_bench.experiments.grid.pipeline import sft_config, sft_folder, tiny_cells  # noqa: E402
from daca_bench.experiments.grid.presets import PRESETS  # noqa: E402

SFT_FILES = ("summary.json", "config.json", "metrics.jsonl")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sft_starts(preset: str, work: Path) -> list[Path]:
    """The SFT folders the preset's cells train from (run_sft's, under WORK), finished or not."""
    p = PRESETS[preset]
    return [sft_folder(work, sft_config(p, fam, seed)) for fam in p.families.values() for seed in p.sft_seeds]


def whole_seeds(preset: str, finished: set[str]) -> set[str]:
    """The finished cells whose seed (task, seed, SFT start) has every planned arm finished: a seed's arms share
    its rollout noise and masks, and cells differ across CPUs from step 1 (BENCHMARKS.md, "Reproducibility"),
    so a seed is carried whole or left to run whole on the next machine."""
    p = PRESETS[preset]
    seeds = {}
    for c in tiny_cells(p, {label: {"folder": ""} for label in p.families}):
        key = (c.axes["train.task"], c.axes["train.seed"], c.axes.get("sft_start"))
        seeds.setdefault(key, set()).add(c.name)
    return {n for names in seeds.values() if names <= finished for n in names}


def save(preset: str, work: Path, carry: Path) -> None:
    run = cellstore.all_cells(work / preset)
    finished = {n for n, c in run.items() if c.has("summary.json")}
    keep = whole_seeds(preset, finished) | {n for n in finished if n.startswith(cellstore.START + "/")}
    done = {n: run[n] for n in sorted(keep)}
    carry.mkdir(parents=True, exist_ok=True)
    cellstore.write_checked(done, carry / cellstore.PACKED)
    hashes = {}
    for folder in sft_starts(preset, work):
        if not (folder / "summary.json").exists():
            continue  # not trained yet: the next part trains it
        target = carry / "sft" / folder.name
        (target / "final").mkdir(parents=True, exist_ok=True)
        for name in SFT_FILES:
            shutil.copy2(folder / name, target / name)
        for f in sorted((folder / "final").iterdir()):
            shutil.copy2(f, target / "final" / f.name)
            hashes[f"{folder.name}/final/{f.name}"] = sha256(f)
    (carry / "carried.json").write_text(
        json.dumps(
            {
                "preset": preset,
                "finished": sorted(done),
                "held_back": sorted(finished - keep),  # finished, but their seed is not: it reruns whole
                "unfinished": sorted(set(run) - finished),
                "sha256": hashes,
            },
            indent=1,
        )
        + "\n"
    )
    cells = [n for n in done if not n.startswith(cellstore.START)]
    print(
        f"{carry}: {len(cells)} finished cells of whole seeds (+ {len(done) - len(cells)} start records; "
        f"{len(finished - keep)} finished cells of unfinished seeds held back), {len(hashes)} SFT files"
    )


def restore(preset: str, work: Path, carry: Path) -> None:
    meta = json.loads((carry / "carried.json").read_text())
    if meta["preset"] != preset:
        sys.exit(f"{carry} carries {meta['preset']}, not {preset}")
    cells_dir = work / preset
    starts = sorted((carry / "sft").iterdir())
    for folder in starts:  # every check before anything is written
        target = work / "sft" / folder.name
        if (target / "summary.json").exists() and not all(
            sha256(work / "sft" / k) == v for k, v in meta["sha256"].items() if k.startswith(folder.name + "/")
        ):
            sys.exit(f"{target} holds other weights than the carried start: move it away first")
    try:
        cellstore.write_cells(cellstore.read_packed(carry / cellstore.PACKED), cells_dir)
    except ConfigError as exc:
        sys.exit(str(exc))
    for folder in starts:
        shutil.copytree(folder, work / "sft" / folder.name, dirs_exist_ok=True)
    bad = [k for k, v in meta["sha256"].items() if sha256(work / "sft" / k) != v]
    if bad:
        sys.exit(f"restored SFT files differ from their hashes: {bad}")
    print(f"{cells_dir}: {len(meta['finished'])} finished cells restored; {len(meta['unfinished'])} were unfinished")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("save", "restore"))
    ap.add_argument("preset")
    ap.add_argument("--work-dir", default="runs/reproduce")
    ap.add_argument("--carry", default=None, help="default results/PRESET/unfinished")
    a = ap.parse_args()
    carry = Path(a.carry or f"results/{a.preset}/unfinished")
    (save if a.mode == "save" else restore)(a.preset, Path(a.work_dir), carry)


if __name__ == "__main__":
    main()
