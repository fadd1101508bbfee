"""DPS credit study: do the Denoising Progress Scores put weight on the tokens that are wrong?
(docs/estimators.md, "Credit")

    wrong = wrong_tokens(adapter, ro)                 # (N, L) bool, or None for a task without one answer
    rows = credit_rows(adapter, ro, wrong)            # one row per score in credit.SCORES

A token is wrong when it differs from the gold canvas at its position (the task's unique
answer followed by EOS padding, as SFT saw it): 4x4 sudoku cells against the solution,
arithmetic digits against the number. In the FAILED rollouts (exact status not `correct`),
over their valid tokens: the AUC of each score's DPS weights separating wrong tokens from
right ones (Mann-Whitney U / (n_wrong n_right); above 0.5 = more weight on wrong tokens) with a
95 % bootstrap interval over sequences, the same AUC over pairs committed at the same step only
(what a score knows beyond the commit step, since wrong tokens tend to come late), the Spearman correlation of the weights with the
commit step, and, over all rollouts, the cosine between the DPS-weighted and the unweighted
exact policy gradient (how far the weighting rotates the update).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats

from ...config import DPSConfig
from ...rl.credit import SCORES, dps_weights
from ..figures.gold import ONE_ANSWER_TASKS
from .gradients import Rollouts, bootstrap_prompts, cosine_and_ratio, exact_estimator, gram, prompt_gradients
from .shared import bootstrap_items, spearman


def gold_target(adapter, sample, L: int) -> list[int]:
    """The gold completion canvas: the target's ids, then EOS to L (cut at L)."""
    ids = adapter.encode([sample.target])[0][:L]
    return ids + [adapter.eos_token_id] * (L - len(ids))


WRONGNESS = {task: gold_target for task in ONE_ANSWER_TASKS}  # tasks with one right canvas


def wrong_tokens(adapter, ro: Rollouts, task_name: str) -> torch.Tensor | None:
    """(N, L) bool: the completion token differs from the task's gold canvas there; None if the task has none."""
    fn = WRONGNESS.get(task_name)
    if fn is None:
        return None
    gold = torch.tensor([fn(adapter, s, ro.L) for s in ro.samples])
    return ro.batch.completion_ids != gold


def weights_for(score: str, ro: Rollouts, seed: int = 0, norm: str | None = None) -> torch.Tensor:
    """(N, L) DPS weights of `score` with the default lambda and clip (and normalisation unless named);
    the `random` control's draws keyed by the rollouts' sequence ids."""
    cfg = DPSConfig(enabled=True, score=score, **({"norm": norm} if norm else {}))
    return dps_weights(ro.batch.trajectory, ro.batch.completion_mask, cfg, seq_ids=ro.seq_ids, seed=seed)


def token_auc(weights: np.ndarray, wrong: np.ndarray) -> float:
    """P(weight of a wrong token > weight of a right one), ties half: Mann-Whitney U / (n1 n0)."""
    w1, w0 = weights[wrong], weights[~wrong]
    if not len(w1) or not len(w0):
        return float("nan")
    return float(stats.mannwhitneyu(w1, w0).statistic / (len(w1) * len(w0)))


def within_auc(weights: np.ndarray, wrong: np.ndarray, groups: np.ndarray) -> float:
    """The AUC over pairs from the same group (commit step) only: what a score knows beyond the step."""
    u = pairs = 0.0
    for g in np.unique(groups):
        w, y = weights[groups == g], wrong[groups == g]
        n1, n0 = int(y.sum()), int((~y).sum())
        if n1 and n0:
            u += float(stats.mannwhitneyu(w[y], w[~y]).statistic)
            pairs += n1 * n0
    return u / pairs if pairs else float("nan")


def auc_with_interval(weights: np.ndarray, wrong: np.ndarray, valid: np.ndarray, seed: int = 0, groups=None):
    """AUC over the valid tokens of (n, L) sequences, with a 95 % bootstrap interval over sequences;
    with (n, L) `groups`, the AUC within groups (`within_auc`)."""
    parts = (weights, wrong) if groups is None else (weights, wrong, groups)
    per_seq = [[a[i][valid[i]] for a in parts] for i in range(len(weights))]

    def stat(idx):
        cat = [np.concatenate([per_seq[i][j] for i in idx]) for j in range(len(parts))]
        return token_auc(*cat) if groups is None else within_auc(*cat)

    point = stat(range(len(per_seq)))
    if not np.isfinite(point):
        return point, (float("nan"), float("nan"))
    return point, bootstrap_items(stat, len(per_seq), seed)


def credit_rows(
    adapter, ro: Rollouts, wrong: torch.Tensor, seed: int = 0, scores=None, plain=None, norm: str | None = None
) -> list[dict]:
    """One row per DPS score (every entry of credit.SCORES unless named); `plain`: the (B, P) exact
    per-prompt gradients when already computed."""
    failed = np.array([s != "correct" for s in ro.statuses])
    valid = ro.batch.completion_mask.numpy()
    step = ro.batch.trajectory.commit_step.numpy()
    wrong_np = wrong.numpy()
    exact = exact_estimator(ro.T)
    plain = prompt_gradients(adapter, ro, exact, 0)[0] if plain is None else plain
    g_plain = gram(plain, plain)
    ones = np.ones((1, ro.prompts))
    rows = []
    for name in scores or list(SCORES):
        w = weights_for(name, ro, seed, norm)
        wn = w.numpy()
        auc, ci = auc_with_interval(wn[failed], wrong_np[failed], valid[failed], seed)
        auc_step, ci_step = auc_with_interval(wn[failed], wrong_np[failed], valid[failed], seed, groups=step[failed])
        sel = valid & failed[:, None]
        rho = spearman(wn[sel], step[sel]) if sel.sum() > 2 else float("nan")
        weighted = prompt_gradients(adapter, ro, exact, 0, weights=w)[0]
        cross, g_w = gram(weighted, plain), gram(weighted, weighted)
        cos = float(cosine_and_ratio(ones, cross, g_w, g_plain)[0][0])
        cos_ci = bootstrap_prompts(lambda c: cosine_and_ratio(c, cross, g_w, g_plain)[0], ro.prompts, seed)
        rows.append(
            {
                "score": name,
                "failed_seqs": int(failed.sum()),
                "tokens": int(sel.sum()),
                "wrong_tokens": int((wrong_np & sel).sum()),
                "auc": float(auc),
                "auc_ci": ci,
                "auc_within_step": float(auc_step),
                "auc_within_step_ci": ci_step,
                "spearman_commit_step": float(rho),
                "cosine_weighted_vs_plain": cos,
                "cosine_weighted_vs_plain_ci": cos_ci,
            }
        )
    return rows
