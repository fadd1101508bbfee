"""Issue 58: the SFT start as a random effect without a pretest (analysis/power.py, budgets.by_start).
Simulated designs with a planted start x arm interaction: the test's null rate is at most 6 % and its
power at the MDE the design states is 75-85 %, at 2 starts and at 8; the pretest it replaced is shown
to fail the same check (so the check can fail)."""

import math

import numpy as np
import pytest

from daca_bench.experiments.analysis import power as pw
from daca_bench.experiments.analysis.budgets import by_start
from daca_bench.experiments.analysis.stats import compare, mean_squares

# shaped like results/tiny-compute's cells at the cluster level: 68 clusters, seed sd 4.5 pp, start x arm sd 5 pp
SHAPES = {
    "tiny-compute-like": (25.0, 20.0, 4.0, 600.0),
    "large start term": (36.0, 20.0, 4.0, 1500.0),
    "no start term": (0.0, 20.0, 4.0, 600.0),
}
DESIGNS = [(2, 8), (8, 2)]  # the same 16 units over 2 starts and over 8


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("starts,seeds", DESIGNS)
def test_null_rate_and_power_at_the_stated_mde(shape, starts, seeds):
    comps = SHAPES[shape]
    stated = pw.start_mde(comps, starts, seeds, 68)
    null = pw.rejections(comps, starts, seeds, 68, effect=0.0, reps=3000, seed=1)
    found = pw.rejections(comps, starts, seeds, 68, effect=stated, reps=3000, seed=2)
    assert null <= 0.06, (shape, starts, null)
    assert 0.75 <= found <= 0.85, (shape, starts, stated, found)
    # and the planted effect is not found at a tenth of it (the test has a level, not just a rate)
    assert pw.rejections(comps, starts, seeds, 68, effect=stated / 10, reps=1000, seed=3) < 0.15


def _pretest_p(x, groups):
    """The rule issue 58 removed: the start term dropped when MS_starts <= MS_seeds (the plain seed x
    cluster model over all units then)."""
    from scipy import stats

    ms_b, ms_w, ms_p, ms_e = pw.start_mean_squares(x, groups)
    se_start, df_start = pw._se_df(ms_b, ms_p, ms_e, 2, x.shape[-2], x.shape[-1])
    S, P = x.shape[-2:]
    ms_s, ms_p2, ms_e2 = mean_squares(x)
    from daca_bench.experiments.analysis.stats import _se_df

    se_plain, df_plain = _se_df(ms_s, ms_p2, ms_e2, S, P)
    keep = ms_b > ms_w
    se, df = np.where(keep, se_start, se_plain), np.where(keep, df_start, df_plain)
    return 2 * stats.t.sf(np.abs(x.mean((-2, -1))) / se, df)


def test_the_pretest_it_replaced_fails_the_null_check_at_two_starts():
    comps = (25.0, 20.0, 4.0, 600.0)  # start sd 5 pp: the data's 3.3-5.6
    x, groups = pw.simulate(comps, 2, 8, 68, effect=0.0, reps=3000, seed=4)
    pretest = float(np.mean(_pretest_p(x, groups) < 0.05))
    now = float(np.mean(pw.start_p(x, groups) < 0.05))
    assert pretest > 0.08 and now <= 0.06  # the 11.5-13.8 % against at most 6 %


def test_by_start_is_the_vectorised_test_on_one_matrix_and_has_no_pretest():
    x, groups = pw.simulate((0.0, 20.0, 4.0, 600.0), 2, 4, 30, effect=3.0, reps=50, seed=5)
    for r in range(50):
        c = by_start(x[r], groups, n_boot=10)
        se, df = pw.start_se_df(x[r], groups)
        assert (c.se, c.df, c.p) == (pytest.approx(se), pytest.approx(df), pytest.approx(pw.start_p(x[r], groups)))
        assert c.df <= 1.0 and not c.seed_dropped  # two starts: one df, whatever the start term's estimate
    one = by_start(x[0], [0] * 8, n_boot=10)  # one start: the seed x cluster model, conditional on it
    assert one == compare(x[0], n_boot=10)


def test_the_components_are_recovered_and_the_mde_falls_with_more_starts():
    comps = (16.0, 9.0, 4.0, 400.0)
    x, groups = pw.simulate(comps, 40, 3, 60, effect=0.0, reps=200, seed=6)
    est = np.mean([pw.start_components(x[r], groups) for r in range(200)], axis=0)
    assert est == pytest.approx(comps, rel=0.15)
    mdes = [pw.start_mde(comps, t, 2, 68) for t in (2, 4, 8, 16)]
    assert all(a > b for a, b in zip(mdes, mdes[1:])) and mdes[0] > 5 * mdes[2]
    se, df = pw.expected(comps, 8, 2, 68)
    assert df == 7.0 and se == pytest.approx(math.sqrt(16 / 8 + 9 / 16 + 4 / 68 + 400 / (16 * 68)))


def test_an_unbalanced_design_is_refused_in_one_line():
    with pytest.raises(ValueError, match="same number of seeds"):
        pw.start_se_df(np.zeros((5, 4)), [0, 0, 0, 1, 1])
