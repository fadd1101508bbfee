"""Gradient-level estimator study: each likelihood estimator's GRPO policy gradient against the
exact decode-order gradient, on the same rollouts (docs/estimators.md).

    ro = rollouts(adapter, samples, task, sampler_cfg, group=8, seed=0)
    rows = gradient_rows(adapter, ro, estimators(ro.L, ro.T), draws=3)

The exact reference is `sml_logprobs(partition="causal", k=T)`: every token scored on the
canvas the sampler committed it from (T = the sampler's steps; it equals the recorded
`commit_logp`). A policy-gradient estimate is the gradient of sum_i A_i * mean_k logp_ik over
each sequence's valid tokens (the `grpo` loss at ratio 1), A = r - group mean. Gradients are
kept per prompt (one group of G completions) as Gram matrices, so that cosine and norm ratio
can be bootstrapped over prompts (scipy.stats.bootstrap) without storing the vectors.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ...config import LossConfig, SamplerConfig
from ...rl.losses import ADVANTAGES, LOSSES
from ...rl.sampler import sample
from ...rl.strata import keyed_generator
from .shared import Estimator, bootstrap_items, nearby_copy, row_corr


@dataclass
class Rollouts:
    """B prompts x G completions with the trajectory record, rewards and GRPO advantages."""

    batch: object  # RolloutBatch
    samples: list  # one Sample per sequence (each prompt repeated G times)
    statuses: list[str]
    rewards: torch.Tensor  # (N,)
    adv: torch.Tensor  # (N,)
    group: int
    T: int  # the sampler's steps
    seq_ids: list = field(default_factory=list)

    @property
    def L(self) -> int:
        return self.batch.completion_ids.shape[1]

    @property
    def prompts(self) -> int:
        return len(self.samples) // self.group

    def rows(self, b: int) -> slice:
        return slice(b * self.group, (b + 1) * self.group)


def rollouts(adapter, prompts, task, cfg: SamplerConfig, group: int, seed: int = 0) -> Rollouts:
    """Sample `group` completions per prompt sample (one seed per sequence), verify, advantages."""
    rows = [s for s in prompts for _ in range(group)]
    seq_ids = [(seed, i // group, i % group) for i in range(len(rows))]
    seeds = [int(keyed_generator(*k).initial_seed() % 2**62) for k in seq_ids]
    adapter.model.eval()
    with torch.no_grad():
        batch = sample(adapter, [s.prompt for s in rows], cfg, seed=seeds)
    rewards = [task.verify(s, text) for s, text in zip(rows, batch.texts)]
    r = torch.tensor([x.value if x.scored else float("nan") for x in rewards], dtype=torch.float32)
    adv = ADVANTAGES["grpo"](r.view(-1, group), LossConfig())
    return Rollouts(batch, rows, [x.status for x in rewards], r, adv, group, cfg.steps, seq_ids)


# ---- the estimators (studies.Estimator) ----------------------------------------------------
def estimators(L: int, T: int, elbo_draws=(1, 4, 16)) -> list[Estimator]:
    """Every estimator of the study that fits a canvas of L tokens decoded in T steps; exact last."""
    out = [
        Estimator("mean field (K=1)", "mean field", 1, False, 1, "strided"),
        Estimator("mean field (K=1), prompt mask 0.15", "mean field", 1, True, 1, "strided", 0.15),
        Estimator("coupled (K=2, random)", "SML random", 2, True, 2, "random"),
    ]
    for k in (2, 4, 8):
        for part in ("random", "strided", "commit_order"):
            if k <= L and (k, part) != (2, "random"):
                out.append(Estimator(f"SML K={k} {part}", f"SML {part}", k, part == "random", k, part))
    out += [Estimator(f"causal K={k}", "causal", k, False, k, "causal") for k in (2, 4) if k < T]
    out += [Estimator(f"MC ELBO ({d} draws)", "ELBO", d, True, elbo_draws=d) for d in elbo_draws]
    out.append(exact_estimator(T))
    return out


def exact_estimator(T: int) -> Estimator:
    return Estimator(f"causal K=T={T} (exact)", "causal", T, False, T, "causal")


# ---- per-prompt gradients ----------------------------------------------------------------
def seq_mean(logp: torch.Tensor, valid: torch.Tensor, weights=None) -> torch.Tensor:
    """(n, L) -> (n,): the (weighted) mean over each sequence's valid tokens, as the grpo loss aggregates."""
    v = valid.to(logp.device).float()
    w = v if weights is None else v * weights.to(logp.device)
    return (logp * w).sum(1) / v.sum(1).clamp(min=1)


def prompt_gradients(adapter, ro: Rollouts, est: Estimator, draw: int, weights=None):
    """(B, P) policy-gradient estimate of each prompt's group, grad of sum_i A_i mean_k w_k logp_ik, and
    the (N,) per-sequence log-likelihood estimates sum_k logp_ik over valid tokens (detached)."""
    params = [p for p in adapter.model.parameters() if p.requires_grad]
    grads_out, seq = [], []
    for b in range(ro.prompts):
        rows = ro.rows(b)
        adv = ro.adv[rows].to(adapter.device)
        valid = ro.batch.completion_mask[rows]
        logp = est.logp(adapter, ro, rows, draw)
        seq.append((logp.detach().cpu() * valid).sum(1).double())
        if not adv.abs().sum():  # no signal in this group: its gradient is zero
            grads_out.append(torch.zeros(sum(p.numel() for p in params)))
            continue
        w = None if weights is None else weights[rows]
        grads = torch.autograd.grad((adv * seq_mean(logp, valid, w)).sum(), params, allow_unused=True)
        grads_out.append(
            torch.cat(
                [(g if g is not None else torch.zeros_like(p)).reshape(-1).float().cpu() for g, p in zip(grads, params)]
            )
        )
    return torch.stack(grads_out), torch.cat(seq).numpy()


def gram(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return (a.double() @ b.double().T).numpy()


def _quad(counts: np.ndarray, m: np.ndarray) -> np.ndarray:
    """counts (R, B), m (B, B) -> (R,) c^T m c."""
    return np.einsum("rb,bc,rc->r", counts, m, counts)


def _counts(idx: np.ndarray, B: int) -> np.ndarray:
    idx = np.atleast_2d(idx)
    return np.stack([np.bincount(row, minlength=B) for row in idx]).astype(float)


def cosine_and_ratio(counts, cross: np.ndarray, g_est: np.ndarray, g_ref: np.ndarray):
    """Cosine and norm ratio of sum_b c_b e_b against sum_b c_b x_b for each row of counts."""
    ee, xx, ex = _quad(counts, g_est), _quad(counts, g_ref), _quad(counts, cross)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ex / np.sqrt(ee * xx), np.sqrt(ee / xx)


def bootstrap_prompts(statistic, B: int, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of statistic(counts (R, B)) -> (R,) over prompts resampled with replacement."""
    return bootstrap_items(lambda idx: statistic(_counts(idx, B)), B, seed, vectorized=True)


def gradient_rows(adapter, ro: Rollouts, table: list[Estimator], draws: int = 3, progress=None):
    """One row per estimator: cosine and norm ratio with the exact gradient (mean over mask draws,
    95 % bootstrap interval over prompts, sd over draws) and the cost (passes per sequence, seconds).
    Also returns {"exact": (B, P) exact gradients, "old": name -> (D, N) sequence log-likelihood estimates}."""
    exact, exact_seq = prompt_gradients(adapter, ro, exact_estimator(ro.T), 0)
    g_ref = gram(exact, exact)
    B, ones = ro.prompts, np.ones((1, ro.prompts))
    rows, old = [], {}
    for est in table:
        crosses, grams, secs, seqs = [], [], [], []
        for d in range(draws if est.random else 1):
            tick = time.perf_counter()
            g, seq = prompt_gradients(adapter, ro, est, d)
            secs.append(time.perf_counter() - tick)
            crosses.append(gram(g, exact))
            grams.append(gram(g, g))
            seqs.append(seq)
        old[est.name] = np.stack(seqs)

        def stat(counts, col=0):
            return np.mean([cosine_and_ratio(counts, c, m, g_ref)[col] for c, m in zip(crosses, grams)], axis=0)

        per_draw = np.array([cosine_and_ratio(ones, c, m, g_ref) for c, m in zip(crosses, grams)])[..., 0]  # (D, 2)
        rows.append(
            {
                "estimator": est.name,
                "family": est.family,
                "k": est.k,
                "draws": len(crosses),
                "passes_per_seq": est.passes,
                "seconds": float(np.mean(secs)),
                "cosine": float(per_draw[:, 0].mean()),
                "cosine_ci": bootstrap_prompts(stat, B),
                "cosine_sd_draws": float(per_draw[:, 0].std()),
                "norm_ratio": float(per_draw[:, 1].mean()),
                "norm_ratio_ci": bootstrap_prompts(lambda c: stat(c, 1), B),
                "norm_ratio_sd_draws": float(per_draw[:, 1].std()),
            }
        )
        if progress:
            progress(est.name)
    old["__exact__"] = exact_seq[None]
    return rows, {"exact": exact, "old": old}


# ---- the ratio view: mu exact-gradient steps, then each estimator's log-ratio against the exact one ----
def updated_policy(adapter, ro: Rollouts, mu: int, lr: float):
    """A copy of the model after mu AdamW steps of the grpo loss on the exact decode-order log-probs."""
    exact, all_rows = exact_estimator(ro.T), slice(0, len(ro.samples))
    valid = ro.batch.completion_mask.to(adapter.device)
    ones = torch.ones(valid.shape, device=adapter.device)
    with torch.no_grad():
        old = exact.logp(adapter, ro, all_rows, 0)

    def loss(new):
        return LOSSES["grpo"](
            exact.logp(new, ro, all_rows, 0), old, None, ro.adv.to(adapter.device), valid, ones, LossConfig()
        )[0]

    return nearby_copy(adapter, loss, mu, lr)


@torch.no_grad()
def ratio_rows(new, ro: Rollouts, table: list[Estimator], old: dict, seed: int = 0) -> list[dict]:
    """Per estimator: correlation of its per-sequence log-ratio (new - old over valid tokens, the same
    masks under both policies; `old` from gradient_rows) with the exact one; mean over draws, 95 %
    bootstrap interval over sequences."""
    all_rows, valid = slice(0, len(ro.samples)), ro.batch.completion_mask

    def seq_logp(est, d):
        return (est.logp(new, ro, all_rows, d).cpu() * valid).sum(1).double().numpy()

    ref = seq_logp(exact_estimator(ro.T), 0) - old["__exact__"][0]
    out = []
    for est in table:
        lr = np.stack([seq_logp(est, d) for d in range(len(old[est.name]))]) - old[est.name]  # (D, N)
        corr = row_corr(lr, ref[None])
        ci = bootstrap_items(lambda i: row_corr(lr[:, i], ref[i][None]).mean(0), len(ref), seed, vectorized=True)
        out.append(
            {
                "estimator": est.name,
                "logratio_corr": float(corr.mean()),
                "logratio_corr_ci": ci,
                "logratio_corr_sd_draws": float(corr.std()),
                "logratio_scale": float(np.mean(np.abs(lr)) / max(np.abs(ref).mean(), 1e-12)),
            }
        )
    return out
