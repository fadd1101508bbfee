"""compute.png's bands agree with the tables (issue 58 item 5): with several SFT starts the band is the
t-interval over start means (the start term in, as analysis.budgets.by_start's intervals); with one start
it is over seeds and the caption says it is conditional on that checkpoint. Synthetic points, a planted
start effect."""

import numpy as np
import pandas as pd

from daca_bench.experiments.figures.curves import band, plot_compute


def _points(starts: int, seeds: int, start_sd: float, seed_sd: float = 0.01, rng_seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(rng_seed)
    rows = []
    for st in range(starts):
        shift = rng.normal(0, start_sd)
        for sd in range(seeds):
            for step in (16, 32):
                rows.append(
                    {
                        "task": "sudoku_tiny",
                        "base": "grpo",
                        "variant": "baseline",
                        "start": st,
                        "seed": sd,
                        "step": step,
                        "test_accuracy": 0.3 + shift + rng.normal(0, seed_sd),
                        "flops": 1e12 * step,
                        "completions": 64 * step,
                    }
                )
    return pd.DataFrame(rows)


def test_with_several_starts_the_band_carries_the_start_term():
    pts = _points(starts=8, seeds=4, start_sd=0.10)
    m, half, what = band(pts)
    seeds_only = pts.groupby("step")["test_accuracy"].agg(["std", "count"])
    naive = 1.96 * seeds_only["std"] * 100 / np.sqrt(seeds_only["count"])  # every cell a unit: too narrow
    assert "8 SFT starts" in what and (half > 1.5 * naive).all()
    fig = plot_compute(pts)
    assert "SFT starts" in fig._suptitle.get_text()


def test_with_one_start_the_caption_says_conditional_on_it():
    pts = _points(starts=1, seeds=8, start_sd=0.0, seed_sd=0.05)
    _, half, what = band(pts)
    assert "conditional on one SFT checkpoint" in what and (half > 0).all()
    assert "conditional on one SFT checkpoint" in plot_compute(pts)._suptitle.get_text()
