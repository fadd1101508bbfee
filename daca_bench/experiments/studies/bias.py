"""Likelihood-estimator bias study: how far each estimator is from the exact log-likelihood
of the sampled trajectory, how much it varies over mask draws, and whether its log-ratio
between two nearby policies tracks the true one (what the policy gradient uses).

    daca-bench likelihood-bias --model runs/sft-tiny/final --task arithmetic --n 64 --json bias.json

Reference: the trajectory log-likelihood sum_k commit_logp[k] (exact for the sampled
decoding order; recomputed by replay under the second policy), or with `--reference elbo`
a many-draw Monte Carlo ELBO. Sums run over the whole completion canvas (EOS padding
included: the sampler committed those tokens too). Intervals: 95 % bootstrap over sequences.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import torch

from ...config import RunConfig, SamplerConfig, command_config, to_dict
from ...models import default_device, load_model
from ...rl.sampler import replay_commit_logp, sample
from ...train.sft import sft_loss
from .shared import REFERENCE_DRAW, Estimator, bootstrap_items, nearby_copy, row_corr, spearman

ELBO_DRAWS = 64
REFERENCE_ELBO_DRAWS = 512


def estimators(L: int) -> list[Estimator]:
    """The study's estimators that fit a canvas of L tokens (studies.Estimator; every mask keyed by MASK_SEED)."""
    table = [
        Estimator("mean-field (K=1)", "mean field", 1, False, 1, "random"),
        Estimator("coupled (K=2)", "SML random", 2, True, 2, "random"),
        Estimator("SML K=4", "SML random", 4, True, 4, "random"),
        Estimator("SML K=8", "SML random", 8, True, 8, "random"),
        Estimator(f"pseudo-likelihood (K=L={L})", "SML strided", L, False, L, "strided"),
        Estimator(f"MC ELBO ({ELBO_DRAWS} draws)", "ELBO", ELBO_DRAWS, True, elbo_draws=ELBO_DRAWS),
    ]
    return [e for e in table if e.elbo_draws or e.k <= L]


def nearby_policy(adapter, batch, lr: float, seed: int):
    """A copy of the model one AdamW step away: a masked-diffusion step on the batch's own
    completions with random per-sequence signs, so that log-ratios differ across sequences."""
    gen = torch.Generator().manual_seed(seed)
    signs = (torch.randint(0, 2, (len(batch.texts),), generator=gen) * 2 - 1).float()

    def loss(other):
        total = 0.0
        for i in range(len(batch.texts)):
            sl = slice(i, i + 1)
            step, _ = sft_loss(other, batch.prompt_ids[sl], batch.prompt_mask[sl], batch.completion_ids[sl], gen, 1e-3)
            total = total + signs[i] * step
        return total / len(batch.texts)

    return nearby_copy(adapter, loss, 1, lr, weight_decay=0.01)  # (AdamW's default decay, as recorded)


@torch.no_grad()
def sequence_scores(adapter, batch, est: Estimator, draws) -> np.ndarray:
    """(D, N) sequence log-likelihood estimates, one row per mask draw (`draws`: a count or the draw ids)."""
    args = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids)
    ids = range(draws) if isinstance(draws, int) else draws
    return np.stack([est.score(adapter, *args, d).sum(1).float().cpu().numpy() for d in ids])


def reference_scores(adapter, other, batch, reference: str) -> tuple[np.ndarray, np.ndarray]:
    """The reference sequence log-likelihood under both policies: (N,), (N,)."""
    if reference == "trajectory":
        with torch.no_grad():
            return batch.trajectory.commit_logp.sum(1).numpy(), replay_commit_logp(other, batch).sum(1).numpy()
    if reference == "elbo":
        big = Estimator("reference ELBO", "ELBO", REFERENCE_ELBO_DRAWS, True, elbo_draws=REFERENCE_ELBO_DRAWS)
        return (
            sequence_scores(adapter, batch, big, [REFERENCE_DRAW])[0],
            sequence_scores(other, batch, big, [REFERENCE_DRAW])[0],
        )
    raise ValueError(f"unknown reference {reference!r}; use trajectory or elbo")


def summarise(name: str, k, est_a: np.ndarray, est_b: np.ndarray, ref_a: np.ndarray, ref_b: np.ndarray, L: int) -> dict:
    """One table row from (D, N) estimates under both policies and the (N,) references."""
    mean_a = est_a.mean(0)
    gap = (mean_a - ref_a) / L  # per token
    ratio, ref_ratio = (est_b - est_a).mean(0), ref_b - ref_a
    n = len(ref_a)
    return {
        "estimator": name,
        "k": k if k is not None else "",
        "draws": est_a.shape[0],
        "bias_per_token": float(gap.mean()),
        "bias_ci": bootstrap_items(lambda i: gap[i].mean(-1), n, vectorized=True),
        "sd_over_draws_per_token": float((est_a.std(0) / L).mean()),
        "rank_corr": spearman(mean_a, ref_a),
        "logratio_corr": float(row_corr(ratio, ref_ratio)),
        "logratio_corr_ci": bootstrap_items(lambda i: row_corr(ratio[i], ref_ratio[i]), n, vectorized=True),
    }


def study(
    adapter,
    prompts: list[str],
    sampler: SamplerConfig,
    draws: int = 8,
    reference: str = "trajectory",
    seed: int = 0,
    lr: float = 1e-3,
    progress: bool = True,
) -> list[dict]:
    from tqdm.auto import tqdm

    adapter.model.eval()
    batch = sample(adapter, prompts, sampler, seed=seed)
    L = batch.completion_ids.shape[1]
    other = nearby_policy(adapter, batch, lr, seed)
    ref_a, ref_b = reference_scores(adapter, other, batch, reference)
    rows = []
    for est in tqdm(estimators(L), desc="estimators", disable=not progress):
        est_a = sequence_scores(adapter, batch, est, draws)
        est_b = sequence_scores(other, batch, est, draws)  # same draws -> same masks under both policies
        rows.append(summarise(est.name, None if est.elbo_draws else est.k, est_a, est_b, ref_a, ref_b, L))
    return rows


def format_table(rows: list[dict]) -> str:
    lines = [
        "| estimator | bias/token [95% CI] | sd over draws/token | rank corr | log-ratio corr [95% CI] |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['estimator']} | {r['bias_per_token']:+.3f} [{r['bias_ci'][0]:+.3f}, {r['bias_ci'][1]:+.3f}]"
            f" | {r['sd_over_draws_per_token']:.3f} | {r['rank_corr']:.2f} | {r['logratio_corr']:.2f} "
            f"[{r['logratio_corr_ci'][0]:.2f}, {r['logratio_corr_ci'][1]:.2f}] |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: no backend is chosen for the caller

    strat = [r for r in rows if r["k"] != ""]
    ks = [r["k"] for r in strat]
    fig = Figure(figsize=(10, 4))
    axes = fig.subplots(1, 2)
    for ax, col, ci, label in (
        (axes[0], "bias_per_token", "bias_ci", "bias per token (nats)"),
        (axes[1], "logratio_corr", "logratio_corr_ci", "log-ratio correlation"),
    ):
        ys = np.array([r[col] for r in strat])
        err = np.array([[y - r[ci][0], r[ci][1] - y] for y, r in zip(ys, strat)]).T
        ax.errorbar(ks, ys, yerr=err, marker="o", capsize=3, label="SML, K strata")
        for r in rows:
            if r["k"] == "":
                ax.axhline(r[col], color="gray", ls="--", label=r["estimator"])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K (strata)")
        ax.set_ylabel(label)
        ax.axhline(0, color="black", lw=0.5)
        ax.legend(fontsize=8)
    fig.suptitle("Likelihood estimators vs the reference (95% bootstrap intervals over sequences)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write_outputs(rows: list[dict], meta: dict, json_path: Path) -> list[Path]:
    stem = json_path.with_suffix("")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({"meta": meta, "estimators": rows}, indent=2) + "\n")
    csv_path, png_path = stem.with_suffix(".csv"), stem.with_suffix(".png")
    keys = [k for k in rows[0] if not k.endswith("_ci")]
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys + ["bias_lo", "bias_hi", "logratio_corr_lo", "logratio_corr_hi"])
        for r in rows:
            w.writerow([r[k] for k in keys] + [*r["bias_ci"], *r["logratio_corr_ci"]])
    plot(rows, png_path)
    return [json_path, csv_path, png_path]


# ---- CLI: `daca-bench likelihood-bias` ----------------------------------------------------
def configure(parser) -> None:
    parser.add_argument(
        "--model", default=None, help="tiny | a save_pretrained folder, e.g. runs/sft-tiny/final (model.name)"
    )
    parser.add_argument("--task", default="arithmetic")
    parser.add_argument("--n", type=int, default=64, help="completions to score")
    parser.add_argument("--draws", type=int, default=8, help="mask draws per estimator")
    parser.add_argument("--reference", choices=("trajectory", "elbo"), default="trajectory")
    parser.add_argument(
        "--gen-length",
        type=int,
        default=None,
        help="sampler.gen_length and sampler.block_length (one block; default 8)",
    )
    parser.add_argument("--steps", type=int, default=None, help="sampler.steps (default 8)")
    parser.add_argument("--temperature", type=float, default=None, help="sampler.temperature (default 0.9)")
    parser.add_argument("--lr", type=float, default=1e-3, help="step size between the two nearby policies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the table as JSON (CSV and PNG beside it)")
    parser.add_argument("--trust-remote-code", action="store_true", default=None, help="model.trust_remote_code=true")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "overrides", nargs="*", help="model.KEY=VALUE and sampler.KEY=VALUE (e.g. model.dtype=bfloat16)"
    )


def run(args) -> int:
    from ...registry import get_task

    options = {
        "model.name": args.model,
        "model.trust_remote_code": args.trust_remote_code,
        "sampler.gen_length": args.gen_length,
        "sampler.block_length": args.gen_length,
        "sampler.steps": args.steps,
        "sampler.temperature": args.temperature,
    }
    cfg = command_config(
        args.overrides, ("model", "sampler"), options, base=RunConfig(sampler=SamplerConfig(temperature=0.9))
    )
    adapter = load_model(cfg.model)
    adapter.model.to(default_device())
    task = get_task(args.task, split="test", seed=args.seed)
    prompts = [s.prompt for s in list(task.samples)[: args.n]]
    rows = study(
        adapter,
        prompts,
        cfg.sampler,
        draws=args.draws,
        reference=args.reference,
        seed=args.seed,
        lr=args.lr,
        progress=not args.no_progress,
    )
    print(format_table(rows))
    if args.json:
        meta = {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "config": to_dict(cfg)}
        paths = write_outputs(rows, meta, args.json)
        print("wrote " + ", ".join(map(str, paths)))
    return 0
