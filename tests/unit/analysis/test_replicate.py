"""`daca-bench table`: a preset's folder, and the replication report (`--against`) on small synthetic
grids that differ in one known way, or not at all (the report tests the difference between the runs,
never a difference in significance), and the statistics behind it checked by hand."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as stats_t

from daca_bench.cli import main
from daca_bench.experiments.analysis.agreement import difference, pool
from daca_bench.experiments.analysis.cellstore import PACKED, is_run
from daca_bench.experiments.analysis.render import to_csv, to_markdown
from daca_bench.experiments.analysis.replicate import compare_tables
from daca_bench.experiments.analysis.replication import verdict
from daca_bench.experiments.analysis.results import load_table, locate

from repo_paths import ROOT

SEEDS, PROMPTS = 4, 200
IDS = [f"arithmetic/{i}" for i in range(PROMPTS)]


def _cell(folder: Path, variant: str, seed: int, rewards: dict):
    """A finished cell in the format results.py reads: config.json, axes.json, summary.json, eval.jsonl."""
    cell = folder / f"variant={variant}_seed={seed}"
    cell.mkdir(parents=True)
    dps, k = {"baseline": (False, 1), "+DPS": (True, 1), "+SML": (False, 4), "+DACA": (True, 4)}[variant]
    (cell / "config.json").write_text(
        json.dumps(
            {
                "train": {"task": "arithmetic", "seed": seed},
                "loss": {"base": "grpo"},
                "dps": {"enabled": dps},
                "sml": {"k": k},
            }
        )
    )
    (cell / "axes.json").write_text(json.dumps({"variant": variant}))
    (cell / "summary.json").write_text(json.dumps({"test_accuracy": float(np.mean(list(rewards.values())))}))
    _eval(cell, rewards)


def _eval(folder: Path, rewards: dict):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eval.jsonl").write_text(
        "".join(json.dumps({"id": i, "completion": "", "reward": r, "status": "x"}) + "\n" for i, r in rewards.items())
    )


def _draw(rng, p, shift=0.0):
    return {i: float(rng.random() < min(1.0, q + shift)) for i, q in zip(IDS, p)}


def _grid(folder: Path, sml_shift: float, seed: int = 0, first_seed: int = 0) -> Path:
    """A preset-shaped output folder (FOLDER/cells/...): the RL start, and per seed (FIRST_SEED on) a
    baseline 10 pp above it, +DPS as the baseline, and +SML shifted by `sml_shift` against the baseline."""
    p = np.random.default_rng(0).beta(2, 3, size=PROMPTS)  # each prompt's difficulty: the same test set
    rng = np.random.default_rng(seed)  # the draws
    cells = folder / "cells"
    _eval(cells / "start" / "arithmetic", _draw(rng, p))
    for s in range(first_seed, first_seed + SEEDS):
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
    are identical, the difference of +SML's two estimates is significant (its interval excludes 0, Holm
    within its family), and the verdict names it."""
    ref, tmp = grids
    run = _with_sml_from(tmp / "run", ref, 0.20)
    assert main(["table", str(run / "cells"), "--against", str(ref)]) == 0
    report = pd.read_csv(run / "replication.csv").set_index("variant")
    assert report.loc["baseline", "status"] == report.loc["+DPS", "status"] == "identical"
    sml = report.loc["+SML"]
    assert sml["status"] == "differs" and 12 < sml["diff_pp"] < 28  # the planted 20 pp, within sampling noise
    assert sml["diff_lo"] > 0 and sml["diff_p_adj"] < 0.05 and sml["diff_p"] <= sml["diff_p_adj"]
    assert sml["diff_se"] == pytest.approx(np.hypot(sml["se_ours"], sml["se_ref"]), rel=1e-3)  # the CSV's 4 digits
    assert np.isnan(sml["pooled_pp"])  # the runs share their seeds (and every other cell): nothing to pool
    line = verdict(compare_tables(load_table(run), load_table(ref)))
    assert line.startswith("Not replicated: 1 of 3 comparisons differ") and "arithmetic +SML +" in line
    md = (run / "replication.md").read_text()  # the report adds the RL starts compared on their shared prompts
    assert line[:-1] + "; the RL start of arithmetic: identical on 200 shared prompts." in md
    assert "| arithmetic | +SML | baseline |" in md and "**differs**" in md
    assert line[:-1] in capsys.readouterr().out


def test_the_same_true_effect_significant_in_one_run_only_shows_no_difference(grids):
    """Two independent runs (other seeds) with the same planted +6 pp on +SML: by chance the reference's
    estimate is significant and this run's is not. That is no difference between them: the difference's
    interval covers 0, the row says `no difference detected` with the difference's MDE (never
    "replicates": without a margin nothing is shown equivalent), and the pooled estimate lies between the two."""
    ref, tmp = grids
    ref6 = _grid(tmp / "ref6", 0.06, seed=0)
    run = _grid(tmp / "run6", 0.06, seed=8, first_seed=100)  # a draw found (with this seed) to be one such case
    report = compare_tables(load_table(run), load_table(ref6), independent=True).set_index("variant")
    sml = report.loc["+SML"]
    assert not sml["sig_ours"] and sml["sig_ref"]  # significant in one run only ...
    assert sml["status"] == f"no difference detected (difference MDE {sml['diff_mde']:.1f} pp)"
    assert sml["diff_lo"] < 0 < sml["diff_hi"] and sml["diff_p_adj"] >= 0.05 and np.isnan(sml["tost_p"])
    lo, hi = sorted([sml["delta_pp_ours"], sml["delta_pp_ref"]])
    assert lo < sml["pooled_pp"] < hi and sml["pooled_lo"] < 6 < sml["pooled_hi"]  # ... pooled: between, near +6
    assert sml["pooled_df"] == 1  # Hartung-Knapp: two runs, a t on one df
    assert (report["status"] != "differs").all()
    assert verdict(report.reset_index()).startswith("No difference detected: none of the 3 comparisons differs")


def test_redrawn_noise_without_an_effect_is_equivalent_only_within_a_margin_it_can_show(grids):
    """+SML redrawn (other random numbers, no shift): the difference is not significant; with a margin
    wider than the difference's interval TOST calls it equivalent, with a margin inside it not."""
    ref, tmp = grids
    run = _with_sml_from(tmp / "noise", ref, 0.0)
    report = compare_tables(load_table(run), load_table(ref)).set_index("variant")
    assert report.loc["+SML", "status"].startswith("no difference detected") and report.loc["+SML", "diff_pp"] != 0
    wide = compare_tables(load_table(run), load_table(ref), margin=30.0).set_index("variant")
    assert wide.loc["+SML", "status"] == "equivalent within ±30" and wide.loc["+SML", "tost_p"] < 0.05
    assert verdict(wide.reset_index()).startswith("Replicated: all 3 comparisons are equivalent within ±30 pp")
    narrow = compare_tables(load_table(run), load_table(ref), margin=1.0).set_index("variant")
    assert narrow.loc["+SML", "status"].startswith("no difference detected") and narrow.loc["+SML", "tost_p"] > 0.05


def test_tost_and_hartung_knapp_on_planted_differences_and_null_ones():
    """TOST (agreement.tost_p): at a true difference equal to the margin it claims equivalence at most 5 %
    of the time; at a true difference of 0 with a margin of 3 SE, most of the time. Hartung-Knapp: its
    interval covers the true mean about 95 % of the time for 3 heterogeneous runs, where the normal
    DerSimonian-Laird interval (agreement.pool's re_lo/re_hi) covers less."""
    from daca_bench.experiments.analysis.agreement import hartung_knapp, tost_p

    rng = np.random.default_rng(0)
    se, df, m = 1.0, 20, 3.0
    at_margin = rng.normal(m, se, 4000)
    s = se * np.sqrt(rng.chisquare(df, 4000) / df)
    assert np.mean([tost_p(x, v, df, m) < 0.05 for x, v in zip(at_margin, s)]) <= 0.055
    at_zero = rng.normal(0, se, 2000)
    assert np.mean([tost_p(x, v, df, m) < 0.05 for x, v in zip(at_zero, s)]) > 0.5
    assert math.isnan(tost_p(0.1, 1.0, 10, 0.0))  # no margin: no equivalence claim
    hk = dl = 0
    for _ in range(2000):
        ses = rng.uniform(1, 2, 3)
        x = 5 + rng.normal(0, 2, 3) + rng.normal(0, ses)  # between-run sd 2
        h = hartung_knapp(x, ses)
        p = pool(x, ses)
        hk += h["lo"] <= 5 <= h["hi"]
        dl += p.re_lo <= 5 <= p.re_hi
    assert 0.93 <= hk / 2000 <= 0.995 and dl < hk


def test_the_difference_and_the_pooled_estimate_match_hand_computed_numbers():
    """difference: +2 (SE 1) against -1 (SE 2) is +3 with SE sqrt(5); normal p 2 * Phi(-3/sqrt(5)) = 0.1797;
    with df 4 and 9 the Welch-Satterthwaite df is 25 / (1/4 + 16/9) = 12.33. pool: 0, 4 and 10 with SEs 1,
    1 and 2 (weights 1, 1, 1/4, W = 9/4): mean 6.5 / 2.25 = 26/9, SE 2/3, Q = 41 - (9/4)(26/9)^2 = 200/9
    on 2 df (p = exp(-Q/2)), tau^2 = (Q - 2) / (W - (1 + 1 + 1/16) / W) = 15.17, I^2 = (Q - 2) / Q = 0.91."""
    d = difference(2.0, 1.0, math.inf, -1.0, 2.0, math.inf)
    assert (d.diff, d.se, d.df) == (3.0, pytest.approx(math.sqrt(5)), math.inf)
    assert d.p == pytest.approx(0.1797, abs=1e-4) and d.hi - d.diff == pytest.approx(1.959964 * math.sqrt(5))
    d = difference(2.0, 1.0, 4, -1.0, 2.0, 9)
    assert d.df == pytest.approx(25 / (1 / 4 + 16 / 9)) == pytest.approx(12.329, abs=1e-3)
    assert d.p == pytest.approx(2 * stats_t.sf(3 / math.sqrt(5), d.df))
    p = pool([0.0, 4.0, 10.0], [1.0, 1.0, 2.0])
    assert p.mean == pytest.approx(26 / 9) and p.se == pytest.approx(2 / 3) and p.k == 3
    assert p.lo == pytest.approx(26 / 9 - 1.959964 * 2 / 3, abs=1e-5)
    assert p.q == pytest.approx(200 / 9) and p.q_p == pytest.approx(math.exp(-100 / 9))
    assert p.tau2 == pytest.approx((200 / 9 - 2) / (9 / 4 - (2 + 1 / 16) / (9 / 4))) == pytest.approx(15.1667, abs=1e-4)
    assert p.i2 == pytest.approx(0.91)
    w = 1 / (np.array([1.0, 1.0, 4.0]) + p.tau2)  # random effects: weights 1 / (se^2 + tau^2)
    assert p.re_mean == pytest.approx((w * [0, 4, 10]).sum() / w.sum()) and p.re_se == pytest.approx(w.sum() ** -0.5)
    same = pool([1.0, 3.0, 2.0], [1.0, 2.0, 1.0])  # Q = 1 < 2 df: no heterogeneity beyond sampling error
    assert same.q == pytest.approx(1.0) and same.tau2 == 0 and same.i2 == 0 and same.re_mean == pytest.approx(same.mean)
    two = pool([2.0, -1.0], [1.0, 2.0], [4, 9])  # two runs: Q is the difference's z^2; df (W^2 / sum w^2/df)
    assert two.q == pytest.approx(9 / 5) and two.df == pytest.approx(1.25**2 / (1 / 4 + 1 / 16 / 9))
    assert math.isnan(pool([1.0, 2.0], [0.0, 1.0]).mean)  # a run without spread has no finite weight


def test_several_independent_runs_are_pooled_with_heterogeneity(grids, capsys):
    """`--against A --against B`: two runs on other seeds, one of them with +SML shifted by +20 pp:
    each run's difference is tested, the three are pooled, and Cochran's Q flags +SML's heterogeneity."""
    ref, tmp = grids
    far = _grid(tmp / "far", 0.20, seed=3, first_seed=20)
    run = _grid(tmp / "run", 0.0, seed=4, first_seed=30)
    assert main(["table", str(run), "--against", str(ref), "--against", str(far)]) == 0
    report = pd.read_csv(run / "replication.csv").set_index("variant")
    sml, dps = report.loc["+SML"], report.loc["+DPS"]
    assert sml["status"] == "differs" and sml["diff_p_adj_2"] < 0.05 and sml["diff_pp_2"] < -12
    assert sml["Q_p"] < 0.01 and sml["I2"] > 0.5 and sml["tau2"] > 0 and dps["status"].startswith("no difference")
    p = pool(
        sml[["delta_pp_ours", "delta_pp_ref", "delta_pp_ref2"]],
        sml[["se_ours", "se_ref", "se_ref2"]],
        sml[["df_ours", "df_ref", "df_ref2"]],
    )
    assert sml["pooled_pp"] == pytest.approx(p.re_mean, rel=1e-3) and sml["Q"] == pytest.approx(p.q, rel=1e-3)
    assert sml["pooled_df"] == 2  # Hartung-Knapp: three runs, a t on two df
    md = (run / "replication.md").read_text()
    assert "against 2 runs (ref 1: " in md and "| Q (p) | I² | τ² | status |" in md and "**differs**" in md
    assert main(["table", str(run), "--against", str(ref), "--against", str(run)]) == 2  # not independent
    assert "shares seeds" in capsys.readouterr().err


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


@pytest.mark.parametrize(
    "name",
    [
        "tiny",
        "tiny-ablation",
        "tiny-confirm",
        "tiny-full-exploratory",
        "tiny-full-sudoku16",
        "tiny-full-code64",
        "tiny-cache",
        "tiny-bases",
        "tiny-compute",
        "tiny-compute-starts",
        "tiny-block",
        "tiny-readings",
    ],
)  # tiny-full: with its report
def test_committed_tables_rebuild_from_their_cells_to_the_byte(name):
    """What results/README.md promises: `daca-bench table results/<name>` rewrites the committed
    table.md and table.csv unchanged (built in memory here, the repository untouched)."""
    folder = ROOT / "results" / name
    if not is_run(folder):
        pytest.skip(f"results/{name} is not in this checkout")
    table = load_table(folder)
    assert to_markdown(table) == (folder / "table.md").read_text()
    assert to_csv(table) == (folder / "table.csv").read_text()


def test_the_committed_tiny_full_replication_report_rebuilds_to_the_byte(tmp_path, monkeypatch):
    """results/tiny-full's table.md/.csv and replication.md/.csv (the confirmation against the
    exploratory run in its three parts) are what `daca-bench table results/tiny-full --against ...`
    writes from the committed cells, built once (run in a scratch tree whose results/ links to the
    repository's, so nothing there is touched)."""
    results = ROOT / "results"
    refs = ["tiny-full-exploratory", "tiny-full-sudoku16", "tiny-full-code64"]
    if not all(is_run(results / n) for n in ["tiny-full", *refs]):
        pytest.skip("results/tiny-full or its reference is not in this checkout")
    run = tmp_path / "results" / "tiny-full"
    run.mkdir(parents=True)
    for name in ("cells", PACKED):  # the committed cells, packed or not
        if (results / "tiny-full" / name).exists():
            (run / name).symlink_to(results / "tiny-full" / name)
    shutil.copy(results / "tiny-full" / "design.json", run / "design.json")
    for n in refs:
        (tmp_path / "results" / n).symlink_to(results / n)
    monkeypatch.chdir(tmp_path)
    assert main(["table", "results/tiny-full", "--against", *(f"results/{n}" for n in refs)]) == 0
    for name in ("table.md", "table.csv", "replication.md", "replication.csv"):
        assert (run / name).read_text() == (results / "tiny-full" / name).read_text(), name
    # every cell ran under the committed design (else the table would read exploratory)
    assert (run / "table.md").read_text().startswith("**Confirmatory**: every cell ran under tiny-full/design.json")


def test_the_committed_tiny_full_confirmation_shows_no_difference_from_the_exploratory_run():
    """Tested as differences (issue 48), no row of the confirmation differs from the exploratory run: the
    largest |difference| / SE is sudoku +SML's 1.81. No margin was declared, so none is called
    equivalent (issue 58): each says `no difference detected` with its difference's MDE. The exploratory
    sudoku +DACA reading, significant there and not here, pools with the confirmation to +4.0, whose
    Hartung-Knapp interval over two runs (one df) is wide: [-10.6, +18.6]."""
    from daca_bench.experiments.analysis.agreement import hartung_knapp

    path = ROOT / "results" / "tiny-full" / "replication.csv"
    if not path.is_file():
        pytest.skip("results/tiny-full is not in this checkout")
    report = pd.read_csv(path)
    done = report[report["diff_pp"].notna()].set_index(["task", "variant"])
    assert len(done) == 16 and done["status"].str.startswith("no difference detected (difference MDE").all()
    assert done["tost_p"].isna().all()
    assert (done["diff_pp"] / done["diff_se"]).abs().max() == pytest.approx(1.81, abs=0.01)
    daca = done.loc[("sudoku_tiny", "+DACA")]
    assert daca["sig_ref"] and not daca["sig_ours"]
    hk = hartung_knapp([daca["delta_pp_ours"], daca["delta_pp_ref"]], [daca["se_ours"], daca["se_ref"]])
    assert daca["pooled_pp"] == pytest.approx(hk["mean"], abs=0.01) and daca["pooled_df"] == 1
    assert (round(daca["pooled_pp"], 1), round(daca["pooled_lo"], 1), round(daca["pooled_hi"], 1)) == (4.0, -10.6, 18.6)


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
    assert "Independent replication: the two runs share no seed" in md and "none of the 3 comparisons differs" in md


def test_two_seed_cells_never_star_what_their_seeds_cannot_support():
    """tiny-quick's design (2 seeds) on the committed results/tiny-ablation cells, seeds 0-1: the seed term of
    +DACA vs baseline drops out (df jumps to clusters - 1); its seeds-only interval includes 0, so it
    carries no star whatever its adjusted p, and the table prints that interval beside the mixed one."""
    folder = ROOT / "results" / "tiny-ablation"
    if not is_run(folder):
        pytest.skip("results/tiny-ablation is not in this checkout")
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

    folder = ROOT / "results" / "tiny-full-sudoku16"
    if not is_run(folder):
        pytest.skip("results/tiny-full-sudoku16 is not in this checkout")
    table = load_table(folder)
    assert (table.loc[table["delta_pp"].notna(), "clusters"] == 69).all()
    assert "sudoku_tiny 69 clusters of 512 prompts" in to_markdown(table)
    cells = folder / "cells"
    _, _, _, vs, d, keys, _ = next(c for c in comparisons(load_results(cells), load_start(cells)) if c[1] == "baseline")
    grid, puzzle = compare(d, clusters=keys, n_boot=10), compare(d, n_boot=10)
    assert (
        vs == "start" and grid.mean == pytest.approx(puzzle.mean) and grid.hi - grid.lo > 1.2 * (puzzle.hi - puzzle.lo)
    )
