"""`daca-bench table`: a preset's folder, and the replication report (`--against`) on two small
synthetic grids that differ in one known way."""
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from daca_bench.cli import main
from daca_bench.experiments.analysis.replicate import compare_tables, verdict
from daca_bench.experiments.analysis.results import load_table, locate, to_csv, to_markdown

SEEDS, PROMPTS = 4, 200
IDS = [f"arithmetic/{i}" for i in range(PROMPTS)]


def _cell(folder: Path, variant: str, seed: int, rewards: dict):
    """A finished cell in the format results.py reads: config.json, axes.json, summary.json, eval.jsonl."""
    cell = folder / f"variant={variant}_seed={seed}"
    cell.mkdir(parents=True)
    dps, k = {"baseline": (False, 1), "+DPS": (True, 1), "+SML": (False, 4), "+DACA": (True, 4)}[variant]
    (cell / "config.json").write_text(json.dumps({"train": {"task": "arithmetic", "seed": seed}, "loss": {"base": "grpo"},
                                                  "dps": {"enabled": dps}, "sml": {"k": k}}))
    (cell / "axes.json").write_text(json.dumps({"variant": variant}))
    (cell / "summary.json").write_text(json.dumps({"test_accuracy": float(np.mean(list(rewards.values())))}))
    _eval(cell, rewards)


def _eval(folder: Path, rewards: dict):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eval.jsonl").write_text("".join(json.dumps({"id": i, "completion": "", "reward": r, "status": "x"}) + "\n"
                                               for i, r in rewards.items()))


def _draw(rng, p, shift=0.0):
    return {i: float(rng.random() < min(1.0, q + shift)) for i, q in zip(IDS, p)}


def _grid(folder: Path, sml_shift: float, seed: int = 0) -> Path:
    """A preset-shaped output folder (FOLDER/cells/...): the RL start, and per seed a baseline 10 pp above
    it, +DPS as the baseline, and +SML shifted by `sml_shift` against the baseline."""
    p = np.random.default_rng(0).beta(2, 3, size=PROMPTS)  # each prompt's difficulty: the same test set
    rng = np.random.default_rng(seed)  # the draws
    cells = folder / "cells"
    _eval(cells / "start" / "arithmetic", _draw(rng, p))
    for s in range(SEEDS):
        base = _draw(rng, p, 0.10)
        _cell(cells, "baseline", s, base)
        _cell(cells, "+DPS", s, _draw(rng, p, 0.10))
        _cell(cells, "+SML", s, _draw(rng, p, 0.10 + sml_shift))
    return folder


@pytest.fixture
def grids(tmp_path):
    return _grid(tmp_path / "reference", 0.0), tmp_path


def _with_sml_from(target: Path, source: Path, shift: float) -> Path:
    """TARGET: a copy of SOURCE whose +SML cells alone are redrawn with a planted shift."""
    shutil.copytree(source, target)
    other = _grid(target.parent / f"_tmp_{target.name}", shift, seed=1)
    for cell in (other / "cells").glob("variant=+SML_*"):
        shutil.rmtree(target / "cells" / cell.name)
        shutil.copytree(cell, target / "cells" / cell.name)
    return target


def test_table_accepts_a_preset_folder_and_writes_beside_cells(grids, capsys):
    ref, tmp = grids
    assert main(["table", str(ref)]) == 0
    assert (ref / "table.md").exists() and not (ref / "cells" / "table.md").exists()
    assert "+SML" in capsys.readouterr().out
    (ref / "table.md").unlink()
    assert main(["table", str(ref / "cells")]) == 0  # the cells/ folder itself: the tables still go beside it
    assert (ref / "table.md").exists() and not (ref / "cells" / "table.md").exists()
    assert locate(ref / "cells" / "variant=+DPS_seed=0") == (ref / "cells" / "variant=+DPS_seed=0",) * 2
    (tmp / "empty").mkdir()
    for folder in (tmp / "empty", tmp / "missing"):
        assert main(["table", str(folder)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(folder) in err[0] and "Traceback" not in err[0]


def test_the_footer_gives_one_number_where_the_range_is_one_value(grids):
    ref, _ = grids
    md = to_markdown(load_table(ref))
    assert f"{SEEDS} seeds per cell, {PROMPTS} paired test prompts per comparison; each prompt its own cluster" in md
    assert f"{SEEDS}-{SEEDS}" not in md


def test_the_same_cells_are_identical(grids, capsys):
    ref, tmp = grids
    shutil.copytree(ref, tmp / "again")
    assert main(["table", str(tmp / "again"), "--against", str(ref)]) == 0
    out = capsys.readouterr().out
    assert "Identical: all 3 comparisons" in out
    assert (tmp / "again" / "replication.md").exists() and (tmp / "again" / "replication.csv").exists()


def test_a_planted_difference_in_one_variant_is_found_and_named(grids, capsys):
    """The two grids share every cell but +SML's, which carry +20 pp in one of them: baseline and +DPS
    are identical, +SML reaches another conclusion, and the verdict names it."""
    ref, tmp = grids
    run = _with_sml_from(tmp / "run", ref, 0.20)
    assert main(["table", str(run / "cells"), "--against", str(ref)]) == 0
    report = pd.read_csv(run / "replication.csv").set_index("variant")
    assert report.loc["baseline", "status"] == report.loc["+DPS", "status"] == "identical"
    sml = report.loc["+SML"]
    assert sml["status"] == "conclusion differs" and bool(sml["sig_ours"]) and not bool(sml["sig_ref"])
    assert 12 < sml["diff_pp"] < 28  # the planted 20 pp, within sampling noise
    assert not sml["ours_covers_ref"] and not sml["ref_covers_ours"] and not sml["sig_agrees"]
    line = verdict(compare_tables(load_table(run), load_table(ref)))
    assert line.startswith("Not replicated: 1 of 3") and "+SML significant here only" in line
    md = (run / "replication.md").read_text()
    assert line in md and "| arithmetic | +SML | baseline |" in md and "**no**" in md
    assert line in capsys.readouterr().out


def test_redrawn_noise_without_an_effect_replicates(grids):
    """+SML redrawn (other random numbers, no shift): the comparisons agree within their intervals."""
    ref, tmp = grids
    run = _with_sml_from(tmp / "noise", ref, 0.0)
    report = compare_tables(load_table(run), load_table(ref)).set_index("variant")
    assert report.loc["+SML", "status"] == "agrees" and report.loc["+SML", "diff_pp"] != 0
    assert verdict(report.reset_index()).startswith("Replicated: all 3 comparisons agree")


def test_rows_in_one_table_only_are_listed(grids):
    ref, tmp = grids
    run = tmp / "fewer"
    shutil.copytree(ref, run)
    for cell in (run / "cells").glob("variant=+SML_*"):
        shutil.rmtree(cell)
    report = compare_tables(load_table(run), load_table(ref)).set_index("variant")
    assert report.loc["+SML", "status"] == "only in reference"
    assert "1 row(s) in one table only" in verdict(report.reset_index())


def test_a_different_rl_start_is_named_in_the_verdict(grids):
    ref, tmp = grids
    run = tmp / "other-start"
    shutil.copytree(ref, run)
    start = run / "cells" / "start" / "arithmetic" / "eval.jsonl"
    rows = [json.loads(x) for x in start.read_text().splitlines()]
    rows[0]["reward"] = 1.0 - rows[0]["reward"]  # one prompt flipped
    start.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = compare_tables(load_table(run), load_table(ref))
    assert report.set_index("variant").loc["start", "status"] == "accuracy differs"
    assert "the RL start of arithmetic differs" in verdict(report)


def test_plan_names_the_seeds_and_prompts_each_comparison_needs(grids, capsys):
    """`table --plan PP` on a synthetic grid: one row per comparison, its MDE the table's, and counts
    that reach PP under the projection (experiments/analysis/plan.py; the projection itself: test_stats.py)."""
    from daca_bench.experiments.analysis.plan import plan_table

    ref, _ = grids
    assert main(["table", str(ref), "--plan", "4"]) == 0
    text = (ref / "plan.md").read_text()
    assert "Seeds and prompts for an MDE of at most 4 pp" in text and text in capsys.readouterr().out
    plan = plan_table(ref, 4.0).set_index("variant")
    table = load_table(ref).set_index("variant")
    assert list(plan.index) == ["baseline", "+DPS", "+SML"]  # the RL start has no comparison
    for v in plan.index:
        assert plan.loc[v, "MDE"] == pytest.approx(table.loc[v, "MDE"], rel=1e-9)
        assert plan.loc[v, "seeds"] == SEEDS and plan.loc[v, "prompts"] == plan.loc[v, "clusters"] == PROMPTS
        assert plan.loc[v, ["seed_share", "prompt_share", "resid_share"]].sum() == pytest.approx(100)
        assert plan.loc[v, "floor"] <= plan.loc[v, "MDE"]
    row = plan.loc["+SML"]
    assert row["MDE"] > 4  # 4 seeds x 200 prompts of 0/1 outcomes: about 6 pp
    # each count is beyond this design (its MDE is above 4) or unreachable on that axis alone (NaN)
    assert not row["clusters_needed"] <= PROMPTS and not row["seeds_needed"] <= SEEDS
    assert not (np.isnan(row["clusters_needed"]) and np.isnan(row["seeds_needed"]))
    assert ("none: seeds set the floor" in text) == bool(plan["clusters_needed"].isna().any())
    assert f"| +SML | baseline | {row['delta_pp']:+.1f} | {SEEDS} x {PROMPTS} | {row['MDE']:.1f} |" in text


@pytest.mark.parametrize("name", ["tiny", "tiny-confirm", "tiny-full-exploratory", "tiny-full-sudoku16", "tiny-full-code64",
                                  "tiny-cache", "tiny-bases"])  # tiny-full: with its replication report, below
def test_committed_tables_rebuild_from_their_cells_to_the_byte(name):
    """What results/README.md promises: `daca-bench table results/<name>` rewrites the committed
    table.md and table.csv unchanged (built in memory here, the repository untouched)."""
    folder = Path(__file__).resolve().parents[1] / "results" / name
    if not (folder / "cells").is_dir():
        pytest.skip(f"results/{name} is not in this checkout")
    table = load_table(folder)
    assert to_markdown(table) == (folder / "table.md").read_text()
    assert to_csv(table) == (folder / "table.csv").read_text()


def test_the_committed_tiny_full_replication_report_rebuilds_to_the_byte(tmp_path, monkeypatch):
    """results/tiny-full's table.md/.csv and replication.md/.csv (the confirmation against the
    exploratory run in its three parts) are what `daca-bench table results/tiny-full --against ...`
    writes from the committed cells, built once (run in a scratch tree whose results/ links to the
    repository's, so nothing there is touched)."""
    results = Path(__file__).resolve().parents[1] / "results"
    refs = ["tiny-full-exploratory", "tiny-full-sudoku16", "tiny-full-code64"]
    if not all((results / n / "cells").is_dir() for n in ["tiny-full", *refs]):
        pytest.skip("results/tiny-full or its reference is not in this checkout")
    run = tmp_path / "results" / "tiny-full"
    run.mkdir(parents=True)
    (run / "cells").symlink_to(results / "tiny-full" / "cells")
    shutil.copy(results / "tiny-full" / "design.json", run / "design.json")
    for n in refs:
        (tmp_path / "results" / n).symlink_to(results / n)
    monkeypatch.chdir(tmp_path)
    assert main(["table", "results/tiny-full", "--against", *(f"results/{n}" for n in refs)]) == 0
    for name in ("table.md", "table.csv", "replication.md", "replication.csv"):
        assert (run / name).read_text() == (results / "tiny-full" / name).read_text(), name
    # every cell ran under the committed design (else the table would read exploratory)
    assert (run / "table.md").read_text().startswith("**Confirmatory**: every cell ran under tiny-full/design.json")


def test_against_a_missing_reference_fails_before_any_table_is_written(grids, capsys):
    ref, tmp = grids
    assert main(["table", str(ref), "--against", str(tmp / "missing")]) == 2
    assert "missing" in capsys.readouterr().err and not (ref / "table.md").exists()
    (tmp / "empty").mkdir()
    assert main(["table", str(ref), "--against", str(tmp / "empty")]) == 2
    assert "no finished cells" in capsys.readouterr().err and not (ref / "table.md").exists()


def test_fewer_seeds_are_judged_on_the_seeds_both_runs_share(grids, capsys):
    """A run with seeds 0-1 of the reference's 0-3 (the same cells): identical on the shared seeds, and
    the report says it judged on them; a run sharing no seed is judged whole, as an independent replication."""
    ref, tmp = grids
    run = tmp / "two-seeds"
    shutil.copytree(ref, run)
    for cell in (run / "cells").glob("variant=*_seed=[23]"):
        shutil.rmtree(cell)
    assert main(["table", str(run), "--against", str(ref)]) == 0
    md = (run / "replication.md").read_text()
    assert "Identical: all 3 comparisons" in md and "Judged on the seeds both runs share (arithmetic 0,1)" in md
    other = tmp / "other-seeds"
    shutil.copytree(ref, other)
    for cell in (other / "cells").glob("variant=*_seed=[01]"):
        shutil.rmtree(cell)
    run2 = tmp / "run2"
    shutil.copytree(run, run2)
    assert main(["table", str(run2), "--against", str(other)]) == 0
    md = (run2 / "replication.md").read_text()  # fresh seeds: an independent replication, each table whole
    assert "Independent replication: the two runs share no seed" in md and "all 3 comparisons" in md


def test_two_seed_cells_never_star_what_their_seeds_cannot_support():
    """tiny-quick's design (2 seeds) on the committed results/tiny cells, seeds 0-1: the seed term of
    +DACA vs baseline drops out (df jumps to clusters - 1); its seeds-only interval includes 0, so it
    carries no star whatever its adjusted p, and the table prints that interval beside the mixed one."""
    folder = Path(__file__).resolve().parents[1] / "results" / "tiny"
    if not (folder / "cells").is_dir():
        pytest.skip("results/tiny is not in this checkout")
    table = load_table(folder, {"sudoku_tiny": {0, 1}})
    done = table[table["delta_pp"].notna()]
    assert (done["seeds"] == 2).all() and done["seed_dropped"].any()
    for _, r in done.iterrows():
        if r["sig"]:
            assert r["seeds_lo"] > 0 or r["seeds_hi"] < 0
    daca = done.set_index("variant").loc["+DACA"]
    assert daca["seed_dropped"] and daca["lo"] > 0 and daca["seeds_lo"] < 0 < daca["seeds_hi"] and not daca["sig"]
    assert f"; seeds [{daca['seeds_lo']:+.1f}, {daca['seeds_hi']:+.1f}]" in to_markdown(table)


def test_a_grid_whose_variants_scored_the_same_prints_no_mde(tmp_path):
    p = np.random.default_rng(0).random(PROMPTS)
    same = {i: float(q > 0.5) for i, q in zip(IDS, p)}
    for v in ("baseline", "+DACA"):
        _cell(tmp_path, v, 0, same)
    table = load_table(tmp_path)
    row = table.set_index("variant").loc["+DACA"]
    assert row["delta_pp"] == 0 and np.isnan(row["MDE"]) and not row["sig"]
    line = next(x for x in to_markdown(table).splitlines() if "| +DACA |" in x)
    assert "| no spread | - |" in line and "0.0 |" not in line.split("no spread")[1]


def test_sudoku_tables_count_solution_grids_not_puzzles():
    """The committed sudoku16 cells: 512 test puzzles of 69 solution grids, each comparison resampled by
    grid (the footer says so), and a by-grid interval wider than the by-puzzle one for baseline vs start."""
    from daca_bench.experiments.analysis.results import comparisons, load_results, load_start
    from daca_bench.experiments.analysis.stats import compare

    folder = Path(__file__).resolve().parents[1] / "results" / "tiny-full-sudoku16"
    if not (folder / "cells").is_dir():
        pytest.skip("results/tiny-full-sudoku16 is not in this checkout")
    table = load_table(folder)
    assert (table.loc[table["delta_pp"].notna(), "clusters"] == 69).all()
    assert "sudoku_tiny 69 clusters of 512 prompts" in to_markdown(table)
    cells = folder / "cells"
    _, _, _, vs, d, keys = next(c for c in comparisons(load_results(cells), load_start(cells)) if c[1] == "baseline")
    grid, puzzle = compare(d, clusters=keys, n_boot=10), compare(d, n_boot=10)
    assert vs == "start" and grid.mean == pytest.approx(puzzle.mean) and grid.hi - grid.lo > 1.2 * (puzzle.hi - puzzle.lo)
