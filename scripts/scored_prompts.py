"""Write configs/scored/<task>.txt: every test prompt a committed table has scored, per task, as
`<prompt digest> <id>` lines, so a confirmatory run can draw its test set disjoint from them by
prompt text (`train.test_exclude`, registry.draw_test).

    python scripts/scored_prompts.py                 # rewrite the lists from results/*/cells
    python scripts/scored_prompts.py --check         # exit 1 when a list misses a scored prompt

Read: every eval.jsonl of results/*'s cells (packed in cells.parquet or not) scored on the test split (the cells and their RL
starts; the readings sweep scored dev), except the folders
given with --skip (a confirmatory run's own folder, whose prompts the list exists to avoid), and
the rescorings that were looked at but not committed (RESCORED: the first N prompts of a task's
test split drawn with seed 0, results/README.md "What would close the gaps"). A scored id's prompt
text comes from the test split's seed-0 draw (every committed table drew with test seed 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "configs" / "scored"
TASKS = ("sudoku_tiny", "python_tiny", "json_tiny")  # arithmetic_tiny: its whole split was scored
# test prompts scored outside the committed cells: tiny-full's sudoku models on 1,024 puzzles and its
# code models on 1,536 prompts (both test_seed 0), reported in results/README.md
RESCORED = {"sudoku_tiny": 1024, "python_tiny": 1536}


# confirmatory runs that drew their test sets against these lists (test seed 1, 2, 3): their ids are not
# in the seed-0 draw; tiny-full's draw is added to the *.after-full.txt lists, which tiny-compute skipped, and
# tiny-compute's to the *.after-compute.txt lists, which tiny-block skips
DRAWN_AGAINST = ("tiny-full", "tiny-compute", "tiny-block", "tiny-compute-starts")
POOL = 4096  # the seed-0 draw that holds every scored prompt (the largest draw scored was 1,536)


def split_of(cell) -> str:
    """The split a cell (its config.json) or an RL start (its summary.json key) was scored on."""
    if cell.has("config.json"):
        return cell.json("config.json")["train"].get("eval_split", "test")
    key = cell.json("summary.json").get("key")
    return json.loads(key).get("split", "test") if key else "test"


def scored(skip: set[str]) -> dict[str, dict[str, str]]:
    """task -> {id: prompt digest} of the prompts scored by the committed tables (and the rescorings)."""
    sys.path.insert(0, str(ROOT))
    from daca_bench.experiments.analysis.cellstore import all_cells, is_run
    from daca_bench.registry import get_task, prompt_digest

    ids: dict[str, set[str]] = {t: set() for t in TASKS}
    for run in sorted(p for p in (ROOT / "results").iterdir() if is_run(p) and p.name not in skip):
        for cell in all_cells(run / "cells").values():  # the cells and their RL starts
            if not cell.has("eval.jsonl") or split_of(cell) != "test":
                continue
            for row in cell.rows("eval.jsonl"):
                if row["id"].split("/", 1)[0] in ids:
                    ids[row["id"].split("/", 1)[0]].add(row["id"])
    out = {}
    for task in TASKS:
        pool = get_task(task, split="test", n=POOL, seed=0).samples
        ids[task] |= {s.id for s in pool[: RESCORED.get(task, 0)]}
        prompts = {s.id: prompt_digest(s.prompt) for s in pool}
        lost = sorted(ids[task] - set(prompts))
        if lost:
            raise SystemExit(
                f"{task}: {len(lost)} scored id(s) (e.g. {lost[0]}) are not in the test split's seed-0 "
                f"draw of {POOL}: their prompt text is unknown"
            )
        out[task] = {i: prompts[i] for i in ids[task]}
    return out


def text(task: str, found: dict[str, str]) -> str:
    head = (
        f"# {task}: the {len(found)} test prompts scored by a committed table (results/*/cells) or a rescoring\n"
        "# looked at before (scripts/scored_prompts.py RESCORED), as `<sha256 of the prompt, 16 hex> <id>`; a\n"
        "# confirmatory test set skips these prompts (train.test_exclude). Regenerate: python scripts/scored_prompts.py\n"
    )
    return head + "".join(f"{d} {i}\n" for i, d in sorted(found.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a written list misses a scored id")
    parser.add_argument(
        "--skip",
        nargs="*",
        default=list(DRAWN_AGAINST),
        help="results folders not read (default: the confirmatory runs drawn against these lists, "
        "with test seeds other than 0: " + ", ".join(DRAWN_AGAINST) + ")",
    )
    args = parser.parse_args()
    found = scored(set(args.skip))
    if args.check:
        from daca_bench.registry import read_excluded

        bad = {t: set(f.values()) - read_excluded(OUT / f"{t}.txt") for t, f in found.items()}
        for t, missing in bad.items():
            if missing:
                print(f"configs/scored/{t}.txt misses {len(missing)} scored prompt(s)")
        return 1 if any(bad.values()) else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for task, f in found.items():
        (OUT / f"{task}.txt").write_text(text(task, f), encoding="utf-8")
        print(f"configs/scored/{task}.txt: {len(f)} prompts ({len(set(f.values()))} distinct texts)")
    for task, f in after_full(found).items():
        (OUT / f"{task}.after-full.txt").write_text(
            text(task, f).replace(
                "scored by a committed table", "scored by a committed table (tiny-full's fresh draw included)"
            ),
            encoding="utf-8",
        )
        print(f"configs/scored/{task}.after-full.txt: {len(f)} prompts")
    for task, f in after_compute(after_full(found)).items():
        (OUT / f"{task}.after-compute.txt").write_text(
            text(task, f).replace(
                "scored by a committed table",
                "scored by a committed table (tiny-full's and tiny-compute's fresh draws included)",
            ),
            encoding="utf-8",
        )
        print(f"configs/scored/{task}.after-compute.txt: {len(f)} prompts")
    return 0


def after_full(found: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The lists a run after tiny-full skips (tiny-compute's test set): each task's list plus the
    prompts tiny-full drew against it (its own test seed and size, skipping that list). Keyed by the
    drawn prompt's digest with the draw's seed in its id, since ids repeat across draws."""
    from daca_bench.experiments.grid.presets import PRESETS
    from daca_bench.registry import draw_test, prompt_digest

    out = {}
    for fam in PRESETS["tiny-full"].families.values():
        rl = fam.rl
        if fam.task not in found or not rl.get("train.test_exclude"):
            continue
        drawn = draw_test(fam.task, "test", rl["train.n_eval"], rl["train.test_seed"], ROOT / rl["train.test_exclude"])
        out[fam.task] = {
            **found[fam.task],
            **{f"{s.id}@seed{rl['train.test_seed']}": prompt_digest(s.prompt) for s in drawn.samples},
        }
    return out


def after_compute(full: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The lists a run after tiny-compute skips (tiny-block's test sets): the after-full lists plus the
    prompts tiny-compute drew against them (keyed like after_full's)."""
    from daca_bench.experiments.grid.presets import PRESETS
    from daca_bench.registry import draw_test, prompt_digest

    out = {task: dict(f) for task, f in full.items()}
    for fam in PRESETS["tiny-compute"].families.values():
        rl = fam.rl
        drawn = draw_test(fam.task, "test", rl["train.n_eval"], rl["train.test_seed"], ROOT / rl["train.test_exclude"])
        out[fam.task].update({f"{s.id}@seed{rl['train.test_seed']}": prompt_digest(s.prompt) for s in drawn.samples})
    return out


if __name__ == "__main__":
    raise SystemExit(main())
