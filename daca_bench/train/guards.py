"""Collapse guards for rollouts: columns computed every training step from the trajectory record
and the completions (no forward pass), logged into metrics.jsonl, and bounds that warn or stop.

    metrics.update(collapse_stats(batch, G, cfg.rollout.threshold))
    if par.any(guard.tripped(metrics, step)):   # guard = Guard(cfg.guard); warns on stderr
        ...                                         # guard.action=stop: checkpoint and stop

Threshold (parallel) rollouts are known to collapse in RL: more tokens committed at once, then
rising entropy at the steps where none passes, then groups that stop differing (docs/trainer.md).
"""

from __future__ import annotations

import sys

import torch

from ..config import GuardConfig

# guard.KEY bound -> (metric column, "max" | "min")
BOUNDS = {
    "max_fallback_frac": ("guard_fallback_frac", "max"),
    "max_fallback_entropy": ("guard_fallback_entropy", "max"),
    "max_commit_entropy": ("guard_commit_entropy", "max"),
    "min_distinct_frac": ("guard_distinct_frac", "min"),
    "max_zero_std": ("zero_std_groups", "max"),
}
ACTIONS = ("warn", "stop")


def fallback_steps(commit_step: torch.Tensor, commit_logp: torch.Tensor, threshold: float):
    """(N, L) record -> (N, T) bool: step t of row i committed exactly one token, not above the
    threshold (the sampler's forced commit), and (N, T) bool: step t of row i ran (committed any)."""
    n, _ = commit_step.shape
    T = int(commit_step.max())
    onehot = torch.nn.functional.one_hot(commit_step.clamp(min=1) - 1, T).bool()  # (N, L, T)
    counts = onehot.sum(1)  # (N, T): tokens committed at each step
    above = (commit_logp.exp() > threshold)[..., None] & onehot  # (N, L, T)
    return (counts == 1) & ~above.any(1), counts > 0


def collapse_stats(batch, G: int, threshold: float | None) -> dict:
    """The guard columns of one rollout batch (this process's rows, in groups of G consecutive rows):
    guard_fallback_frac (steps that committed only their forced token, over all steps) and
    guard_fallback_entropy (those tokens' mean entropy, nats), threshold rollouts only;
    guard_commit_entropy (mean entropy of the valid committed tokens at their commit step);
    guard_distinct_frac (distinct completions per group / G, averaged). The trainer's own
    zero_std_groups column is the fifth guarded number."""
    traj = batch.trajectory
    valid = batch.completion_mask
    out = {}
    if traj.commit_entropy is not None:
        ent = traj.commit_entropy[valid]
        out["guard_commit_entropy"] = float(ent.mean()) if ent.numel() else 0.0
    if threshold is not None:
        forced, ran = fallback_steps(traj.commit_step, traj.commit_logp, threshold)
        out["guard_fallback_frac"] = float(forced.sum() / ran.sum().clamp(min=1))
        if traj.commit_entropy is not None and forced.any():
            at = forced.gather(1, (traj.commit_step.clamp(min=1) - 1))  # (N, L): token was a forced commit
            out["guard_fallback_entropy"] = float(traj.commit_entropy[at].mean())
    rows = [tuple(r.tolist()) for r in batch.completion_ids]
    groups = [rows[i : i + G] for i in range(0, len(rows), G)]
    out["guard_distinct_frac"] = sum(len(set(g)) / len(g) for g in groups) / max(1, len(groups))
    return out


def gathered(batch, par):
    """The parts of a rollout batch the guard columns read, with every process's rows."""
    if par.world == 1:
        return batch
    from types import SimpleNamespace

    traj = batch.trajectory
    g = lambda x: None if x is None else par.gather(x)  # noqa: E731
    return SimpleNamespace(
        completion_ids=g(batch.completion_ids),
        completion_mask=g(batch.completion_mask),
        trajectory=SimpleNamespace(
            commit_entropy=g(traj.commit_entropy), commit_step=g(traj.commit_step), commit_logp=g(traj.commit_logp)
        ),
    )


class Guard:
    """Checks the guard columns against `guard.*` bounds each step. A bound crossed for
    `guard.patience` consecutive steps warns (one line on stderr); with guard.action=stop,
    `tripped` returns True and `message` says which bound, so the trainer can checkpoint and stop.
    A warning is printed once per streak of crossing steps."""

    def __init__(self, cfg: GuardConfig):
        from ..config import pick

        pick({a: a for a in ACTIONS}, cfg.action, "guard.action")
        self.cfg = cfg
        self.streak = 0
        self.message = ""

    def crossed(self, metrics: dict) -> list[str]:
        """The bounds this step's metrics cross, as `column value > bound` strings."""
        out = []
        for key, (column, side) in BOUNDS.items():
            bound, value = getattr(self.cfg, key), metrics.get(column)
            if bound is None or value is None or value != value:  # no bound, no column, NaN
                continue
            if (side == "max" and value > bound) or (side == "min" and value < bound):
                out.append(f"{column}={value:.3f} {'>' if side == 'max' else '<'} guard.{key}={bound}")
        return out

    def tripped(self, metrics: dict, step: int) -> bool:
        crossed = self.crossed(metrics)
        self.streak = self.streak + 1 if crossed else 0
        if not crossed or self.streak < self.cfg.patience:
            return False
        stop = self.cfg.action == "stop"
        self.message = (
            f"collapse guard at step {step}: {'; '.join(crossed)} "
            f"({self.streak} step{'s' if self.streak > 1 else ''} in a row)"
        )
        if stop or self.streak == self.cfg.patience:  # warn once per streak
            print(f"warning: {self.message}" + ("; stopping with a checkpoint" if stop else ""), file=sys.stderr)
        return stop
