"""What the two estimator studies share (`likelihood-bias`, bias.py; `estimators`, gradients.py
and credit_study.py): the estimator record, the ONE mask seed every draw is keyed by, the
bootstrap over items (scipy.stats.bootstrap, percentile), the correlations, and the nearby
policy (a copy of the model a few AdamW steps away).

    est = Estimator("SML K=4 random", "SML random", 4, True, 4, "random")
    logp = est.score(adapter, prompt_ids, prompt_mask, completion, draw=0)    # (N, L)
    lo, hi = bootstrap_items(lambda idx: values[idx].mean(-1), len(values), vectorized=True)
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy import stats

from ...rl.likelihood import elbo_logprobs, sml_logprobs

MASK_SEED = 17  # keys every mask draw of both studies: strata, prompt masks, ELBO draws
ELBO_DRAW_STRIDE = 1000  # draw d of an ELBO estimator uses seed MASK_SEED + 1000 d (its D masks inside)
REFERENCE_DRAW = -1  # the bias study's many-draw reference ELBO: a seed no estimator draw uses
N_BOOT = 999  # bootstrap resamples


@dataclass(frozen=True)
class Estimator:
    """One likelihood estimator of a study: SML with K strata of a partition, or a D-draw ELBO."""

    name: str
    family: str  # for the plots: mean field, SML random / strided / commit_order, causal, ELBO
    passes: int  # forward passes per sequence
    random: bool  # True: several mask draws
    k: int = 1
    partition: str = "random"
    p_mask_prompt: float = 0.0
    elbo_draws: int = 0

    def score(
        self, adapter, prompt_ids, prompt_mask, completion, draw: int, seq_ids=None, commit_step=None
    ) -> torch.Tensor:
        """(N, L) per-token log-likelihood estimates for mask draw `draw` (differentiable)."""
        args = (adapter, prompt_ids, prompt_mask, completion)
        if self.elbo_draws:
            return elbo_logprobs(
                *args, draws=self.elbo_draws, seq_ids=seq_ids, seed=MASK_SEED + ELBO_DRAW_STRIDE * draw
            )
        return sml_logprobs(
            *args,
            k=self.k,
            partition=self.partition,
            seq_ids=seq_ids,
            inner=draw,
            seed=MASK_SEED,
            p_mask_prompt=self.p_mask_prompt,
            commit_step=commit_step,
        )

    def logp(self, adapter, ro, rows: slice, draw: int) -> torch.Tensor:
        """score() on the rows of a gradients.Rollouts, keyed by its sequence ids and decode order."""
        b = ro.batch
        return self.score(
            adapter,
            b.prompt_ids[rows],
            b.prompt_mask[rows],
            b.completion_ids[rows],
            draw,
            seq_ids=ro.seq_ids[rows],
            commit_step=b.trajectory.commit_step[rows],
        )


# ---- statistics ------------------------------------------------------------------------------
def bootstrap(*args, **kwargs):
    """scipy.stats.bootstrap, quiet about degenerate resamples (`interval` leaves them out)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        return stats.bootstrap(*args, **kwargs)


def interval(res) -> tuple[float, float]:
    """The 95 % percentile interval of a scipy bootstrap result, leaving out resamples where the
    statistic is undefined (a resample of prompts that all lack signal, of tokens that are all wrong)."""
    dist = np.asarray(res.bootstrap_distribution, float)
    dist = dist[np.isfinite(dist)]
    return (float(np.percentile(dist, 2.5)), float(np.percentile(dist, 97.5))) if len(dist) else (np.nan, np.nan)


def bootstrap_items(statistic, n: int, seed: int = 0, vectorized: bool = False) -> tuple[float, float]:
    """95 % percentile interval of statistic(idx) over n items (sequences, prompts) resampled with
    replacement: idx is an (n,) int array, or (R, n) with vectorized=True (statistic -> (R,))."""
    if n < 2:
        return float("nan"), float("nan")

    def stat(idx, axis=-1):
        return statistic(idx.astype(int))

    return interval(
        bootstrap(
            (np.arange(n),),
            stat,
            vectorized=vectorized,
            n_resamples=N_BOOT,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
    )


def row_corr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation along the last axis (nan where either side is constant)."""
    a = np.asarray(a, float) - np.mean(a, -1, keepdims=True)
    b = np.asarray(b, float) - np.mean(b, -1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))


def spearman(a, b) -> float:
    """Spearman rank correlation of two (n,) arrays (scipy; nan when undefined)."""
    if len(a) < 2:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return float(stats.spearmanr(a, b).statistic)


# ---- the nearby policy ---------------------------------------------------------------------------
def nearby_copy(adapter, loss_fn, steps: int, lr: float, weight_decay: float = 0.0):
    """A copy of the model after `steps` AdamW steps on loss_fn(copy) -> scalar; the original is untouched."""
    new = replace(adapter, model=copy.deepcopy(adapter.model))
    opt = torch.optim.AdamW([p for p in new.model.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        loss = loss_fn(new)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return new
