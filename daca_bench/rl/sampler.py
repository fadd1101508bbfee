"""LLaDA-style sampler that also returns the trajectory record (docs/method.md, section 3),
at no extra forward pass.

Block semi-autoregressive decoding: the completion canvas (L masks) is split into blocks of
b; each block gets T / (L / b) steps; at each step the model predicts every masked position
and the sampler commits the most confident ones in the current block (`low_confidence`) or
random ones (`random`). Temperature acts through Gumbel noise in float64. With
`threshold` set it decodes in parallel instead (Fast-dLLM): every masked position of the
block whose confidence exceeds the threshold is committed (at least one per step).
`cache` = prefix | dual reuses keys and values within a block (Fast-dLLM; `step_logits`,
docs/method.md section 3.1): the record stays complete, its numbers come from the cached passes.

    batch = sample(adapter, ["12+5="], SamplerConfig(gen_length=8, steps=8), seed=0)
    batch.texts, batch.trajectory.commit_step, batch.trajectory.conf   # (N, L), (N, T, L)

`commit_logp`, `conf` and `commit_entropy` are read from the model's own (untempered) distribution, the
quantity every likelihood estimator in `likelihood.py` also targets; logsumexp and max over
the vocabulary are taken in chunks (`likelihood.logsumexp_max`), never on a float32 copy
of the whole (N, L, V) logits.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass

import torch

from ..archs.common import KVCache
from ..config import SamplerConfig, pick
from ..models import ModelAdapter
from .likelihood import logsumexp_max


@dataclass
class Trajectory:
    commit_step: torch.Tensor  # (N, L) int64: tau_k in 1..T
    commit_logp: torch.Tensor  # (N, L) float32: log p^{tau_k}_k(o_k)
    conf: torch.Tensor  # (N, T, L) float32: max_v p^t_k(v) for k masked before step t, NaN otherwise
    commit_entropy: torch.Tensor | None = None  # (N, L) float32: entropy (nats) of p^{tau_k}_k (collapse guards)


@dataclass
class RolloutBatch:
    prompt_ids: torch.Tensor  # (N, P) left-padded
    prompt_mask: torch.Tensor  # (N, P) 1 = real prompt token
    completion_ids: torch.Tensor  # (N, L)
    completion_mask: torch.Tensor  # (N, L) bool: valid tokens, up to and including the first EOS
    texts: list[str]
    trajectory: Trajectory | None
    forward_passes: int
    commit_step: torch.Tensor | None = None  # (N, L) 1-based step of each commit, kept even with record=False


    @property
    def input_ids(self) -> torch.Tensor:  # (N, P+L)
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:  # (N, P+L)
        return torch.cat([self.prompt_mask, torch.ones_like(self.completion_ids)], dim=1)


def pad_prompts(adapter: ModelAdapter, prompts) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad prompts (strings or id lists) to one length: (N, P) ids and attention mask."""
    ids = adapter.encode(prompts) if prompts and isinstance(prompts[0], str) else [list(p) for p in prompts]
    width = max(len(p) for p in ids)
    out = torch.full((len(ids), width), adapter.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, p in enumerate(ids):
        if p:
            out[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
    return out, mask


def transfer_schedule(masked_count: torch.Tensor, steps: int) -> torch.Tensor:
    """(N,) masked positions in a block -> (N, steps) tokens to commit at each step (LLaDA's split)."""
    base = masked_count // steps
    rem = masked_count % steps
    sched = base[:, None].expand(-1, steps).clone()
    sched += (torch.arange(steps)[None, :] < rem[:, None]).long()
    return sched


def valid_mask(completion_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """(N, L) bool: positions up to and including the first EOS (all, when there is none)."""
    is_eos = completion_ids == eos_id
    after_first = (is_eos.long().cumsum(dim=1) - is_eos.long()) > 0
    return ~after_first


def _uniform(shape, gen, device) -> torch.Tensor:
    """float64 uniforms from one generator, or row by row from one generator per row."""
    if isinstance(gen, list):
        return torch.stack([torch.rand(shape[1:], dtype=torch.float64, generator=g, device=device) for g in gen])
    return torch.rand(shape, dtype=torch.float64, generator=gen, device=device)


def _gumbel(shape, generator, device) -> torch.Tensor:
    u = _uniform(shape, generator, device)
    neg_log_u = (-torch.log(u.clamp_min(1e-300))).clamp_min(1e-300)
    return -torch.log(neg_log_u)


@dataclass(frozen=True)
class Suppress:
    """LLaDA's EOS rules (its generate.py, Appendix B.4), as token ids. `never`: the logits of these
    ids are -inf (never chosen, out of the confidence too: logits_eos_inf); `late`: these ids leave
    the confidence's softmax, so a position whose choice is one of them has confidence 0 and is
    committed after every other one of its step (confidence_eos_eot_inf)."""
    never: tuple[int, ...] = ()
    late: tuple[int, ...] = ()


def _ruled_confidence(blk, x0, rule: Suppress) -> torch.Tensor:
    """(N, b) float64 log-confidence of the choices x0 under `rule`: log softmax over the vocabulary
    without never + late ids; a choice in `late` gets -1e300 (below any real one, above the -inf of
    positions that are not masked, so the schedule still commits it when its turn comes)."""
    out_ids = [i for i in {*rule.never, *rule.late} if 0 <= i < blk.shape[-1]]
    kept = blk.clone()
    kept[..., out_ids] = -math.inf
    lse = logsumexp_max(kept)[0]
    score = (kept.gather(-1, x0[..., None]).squeeze(-1).float() - lse).double()
    return torch.nan_to_num(score, nan=-1e300, neginf=-1e300)


@torch.no_grad()
def _sample_chunk(adapter: ModelAdapter, prompt_ids, prompt_mask, cfg: SamplerConfig, gen: torch.Generator,
                  record: bool, rule: Suppress | None = None):
    device = adapter.device
    n, p = prompt_ids.shape
    L, b = cfg.gen_length, cfg.block_length
    mask_id = adapter.mask_token_id
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    x = torch.cat([prompt_ids, torch.full((n, L), mask_id, dtype=torch.long, device=device)], dim=1)  # (N, P+L)
    attn = torch.cat([prompt_mask, torch.ones((n, L), dtype=torch.long, device=device)], dim=1)
    parallel = cfg.threshold is not None
    kv = None if cfg.cache == "none" else KVCache()
    num_blocks = L // b
    steps_per_block = cfg.steps // num_blocks
    max_steps = L if parallel else cfg.steps
    commit_step = torch.zeros((n, L), dtype=torch.long, device=device)
    commit_logp = torch.zeros((n, L), dtype=torch.float32, device=device)
    commit_ent = torch.zeros((n, L), dtype=torch.float32, device=device) if record else None
    conf_rec = torch.full((n, max_steps, L), math.nan, dtype=torch.float32, device=device) if record else None
    conf_now = torch.full((n, L), math.nan, dtype=torch.float32, device=device) if record else None  # latest c_k
    # never commit a mask, nor a pad unless it is also the EOS (LLaDA: pad = eos), which must stay sampleable
    banned = [i for i in {mask_id, adapter.pad_token_id} - {adapter.eos_token_id} if i is not None]
    banned += list(rule.never) if rule else []
    t = 0
    for blk in range(num_blocks):
        lo, hi = blk * b, (blk + 1) * b  # block span inside the completion
        sched = None if parallel else transfer_schedule((x[:, p + lo:p + hi] == mask_id).sum(1).cpu(), steps_per_block)
        i = 0
        while (x[:, p + lo:p + hi] == mask_id).any():
            t += 1
            # (N, c1-c0, V) logits of completion positions c0..c1-1, in the model's dtype: never copied whole
            logits, c0, c1 = step_logits(adapter, x, attn, p, lo, hi, cfg.cache, kv, fresh=i == 0)
            masked = x[:, p:] == mask_id  # (N, L): M_t
            blk = logits[:, lo - c0:hi - c0]  # (N, b, V)
            if record:  # confidences at every masked position: max_v p = exp(max logit - logsumexp)
                lse, top = logsumexp_max(logits)  # (N, c1-c0) float32
                conf_now[:, c0:c1] = (top - lse).exp()  # positions this pass did not recompute keep their last value
                conf_rec[:, t - 1] = torch.where(masked, conf_now, torch.tensor(math.nan, device=device))
                lse_blk = lse[:, lo - c0:hi - c0]
            else:
                lse_blk = logsumexp_max(blk)[0]  # (N, b)
            # exact: every float32 / bf16 value is a float64; greedy needs no float64 copy (same argmax)
            choice_logits = blk.double() if cfg.temperature > 0 else blk.clone()
            choice_logits[..., banned] = -math.inf
            if cfg.temperature > 0:
                choice_logits = choice_logits / cfg.temperature + _gumbel(choice_logits.shape, gen, device)
            x0 = choice_logits.argmax(-1)  # (N, b)
            del choice_logits
            x0_logp = blk.gather(-1, x0[..., None]).squeeze(-1).float() - lse_blk  # (N, b)
            ruled = _ruled_confidence(blk, x0, rule) if rule and (rule.never or rule.late) else None
            if cfg.remasking == "low_confidence":
                score = x0_logp.double() if ruled is None else ruled
            elif cfg.remasking == "random":
                score = _uniform(x0.shape, gen, device)
            else:
                raise ValueError(f"unknown remasking {cfg.remasking!r}; use low_confidence or random")
            blk_masked = masked[:, lo:hi]
            score = score.masked_fill(~blk_masked, -math.inf)
            rank = score.argsort(dim=1, descending=True).argsort(dim=1)  # (N, b): 0 = most confident
            if parallel:
                conf = x0_logp.exp() if ruled is None else ruled.exp()
                take = blk_masked & ((conf > cfg.threshold) | (rank == 0))
            else:
                take = blk_masked & (rank < sched[:, i].to(device)[:, None])
            i += 1
            cur = x[:, p + lo:p + hi]
            x[:, p + lo:p + hi] = torch.where(take, x0, cur)
            commit_step[:, lo:hi] = torch.where(take, t, commit_step[:, lo:hi])
            commit_logp[:, lo:hi] = torch.where(take, x0_logp, commit_logp[:, lo:hi])
            if record:
                commit_ent[:, lo:hi] = torch.where(take, entropy(blk, lse_blk), commit_ent[:, lo:hi])
    conf = conf_rec[:, :t] if record else None
    return x[:, p:], commit_step, commit_logp, conf, t, commit_ent


CACHES = {"none": None, "prefix": "prefix", "dual": "dual"}  # sampler.cache


@torch.no_grad()
def entropy(logits: torch.Tensor, lse: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """(N, b, V) logits and their (N, b) float32 logsumexp -> (N, b) float32 entropy in nats,
    sum_v p_v (lse - logit_v), `chunk` positions at a time (no float32 copy of the whole)."""
    out = torch.empty_like(lse)
    flat, flat_lse, flat_out = logits.reshape(-1, logits.shape[-1]), lse.reshape(-1), out.view(-1)
    for s in range(0, flat.shape[0], chunk):
        x = flat[s:s + chunk].float()  # (c, V)
        surprise = flat_lse[s:s + chunk, None] - x  # -log p_v
        prob = (-surprise).exp()
        flat_out[s:s + chunk] = torch.where(prob > 0, prob * surprise, 0.0).sum(-1)  # a -inf logit adds 0
    return out


def step_logits(adapter: ModelAdapter, x, attn, p: int, lo: int, hi: int, cache: str, kv: KVCache | None,
                fresh: bool) -> tuple[torch.Tensor, int, int]:
    """One step's forward pass over the (N, P+L) canvas whose current block is completion
    positions [lo, hi): (N, c1-c0, V) logits of completion positions c0..c1-1, and c0, c1.
    none: the whole canvas, every step. prefix / dual: the whole canvas at a block's first step
    (`fresh`; it refills `kv`), then [lo, L) (prefix) or [lo, hi) (dual) against the cached keys."""
    L = x.shape[1] - p
    if cache == "none":
        return adapter.logits(x, attn)[:, p:], 0, L
    if fresh:
        return adapter.forward_cached(x, attn, kv)[:, p:], 0, L
    c1 = L if cache == "prefix" else hi
    return adapter.forward_cached(x, attn, kv, window=(p + lo, p + c1)), lo, c1


def sample(adapter: ModelAdapter, prompts, cfg: SamplerConfig, seed: int | list[int] = 0,
           record: bool = True, rule: Suppress | None = None) -> RolloutBatch:
    """Sample one completion per prompt (repeat prompts for a group), in chunks of cfg.batch_size.

    `seed` is one seed for the whole call, or one per row: then each row's draws do not
    depend on the rest of the batch (what data-parallel training needs). `rule`: LLaDA's EOS
    rules (`Suppress`; an evaluation protocol's setting, none by default)."""
    L, b = cfg.gen_length, cfg.block_length
    if L % b:
        raise ValueError(f"sampler.gen_length={L} must be a multiple of sampler.block_length={b}")
    if cfg.threshold is None and cfg.steps % (L // b):
        raise ValueError(f"sampler.steps={cfg.steps} must be a multiple of the number of blocks {L // b}")
    if pick(CACHES, cfg.cache, "sampler.cache"):
        adapter.require_cache("sampler.cache")
    prompt_ids, prompt_mask = pad_prompts(adapter, prompts)
    if isinstance(seed, int):
        gen = torch.Generator(device=adapter.device).manual_seed(seed)
    else:
        if len(seed) != len(prompt_ids):
            raise ValueError(f"{len(seed)} seeds for {len(prompt_ids)} prompts")
        gen = [torch.Generator(device=adapter.device).manual_seed(int(s)) for s in seed]
    outs, passes = [], 0
    for s in range(0, len(prompt_ids), cfg.batch_size):
        chunk_gen = gen[s:s + cfg.batch_size] if isinstance(gen, list) else gen
        out = _sample_chunk(adapter, prompt_ids[s:s + cfg.batch_size], prompt_mask[s:s + cfg.batch_size], cfg,
                            chunk_gen, record, rule)
        outs.append(out)
        passes += out[4]
    completion = torch.cat([o[0] for o in outs]).cpu()
    traj = None
    if record:
        steps = max(o[3].shape[1] for o in outs)
        conf = torch.cat([torch.nn.functional.pad(o[3], (0, 0, 0, steps - o[3].shape[1]), value=math.nan) for o in outs])
        traj = Trajectory(torch.cat([o[1] for o in outs]).cpu(), torch.cat([o[2] for o in outs]).cpu(), conf.cpu(),
                          torch.cat([o[5] for o in outs]).cpu())
    texts = [adapter.decode(row) for row in completion]
    return RolloutBatch(prompt_ids, prompt_mask, completion, valid_mask(completion, adapter.eos_token_id), texts, traj, passes,
                        torch.cat([o[1] for o in outs]).cpu())


@torch.no_grad()
def replay_commit_logp(adapter: ModelAdapter, batch: RolloutBatch) -> torch.Tensor:
    """Recompute log p^{tau_k}_k(o_k) by rebuilding the canvas of every step: (N, L). Costs T passes:
    it is the `causal` SML estimator with one stratum per sampler step."""
    from .likelihood import sml_logprobs

    traj = batch.trajectory
    steps = int(traj.commit_step.max())
    return sml_logprobs(adapter, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, k=steps,
                        partition="causal", commit_step=traj.commit_step).cpu()


# ---- CLI: `daca-bench sample` -------------------------------------------------------------
CANVAS_KEYS = ("sampler.gen_length", "sampler.block_length", "sampler.steps")


def configure(parser) -> None:
    parser.add_argument("--model", default=None, help="tiny | a save_pretrained folder | a hub id (model.name)")
    parser.add_argument("--task", required=True, help="task whose prompts to sample (see `daca-bench tasks`)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=8, help="number of prompts")
    parser.add_argument("--output", help="JSONL file for the completions and their trajectory record")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trust-remote-code", action="store_true", default=None, help="model.trust_remote_code=true")
    parser.add_argument("overrides", nargs="*",
                        help="model.KEY=VALUE and sampler.KEY=VALUE (e.g. sampler.temperature=0.9 model.dtype=bfloat16)")


def _fitting_canvas(cfg, task, adapter, name: str, chosen: bool):
    """`cfg`, or where its canvas cannot hold the task's gold answers and no canvas was chosen (no canvas
    key given, no run's canvas found) the tiny families' kind of canvas that holds them: one block of
    the longest answer plus EOS rounded up to even, decoded two tokens per step; said on stderr."""
    from dataclasses import replace

    from ..canvas import check, gold_lengths
    from ..errors import ConfigError

    gold = gold_lengths(task, adapter.encode)
    try:
        check(cfg.sampler, "sampler", gold, name, eos=False)
        return cfg
    except ConfigError:
        if chosen or not gold:
            raise
    L = max(gold) + 1 + (max(gold) + 1) % 2  # sudoku_tiny: 16 digits + EOS -> 18, its family's canvas
    canvas = {"gen_length": L, "block_length": L, "steps": L // 2}
    cfg = replace(cfg, sampler=replace(cfg.sampler, **canvas))
    check(cfg.sampler, "sampler", gold, name, eos=False)
    print(f"sampler.gen_length={L}: the default canvas cannot hold {name}'s answers ({max(gold)} tokens); sampling "
          "on " + " ".join(f"sampler.{k}={v}" for k, v in canvas.items()), file=sys.stderr)
    return cfg


def run(args) -> int:
    from ..canvas import check, check_fits
    from ..config import RunConfig, apply, command_config
    from ..models import default_device, load_model, run_canvas
    from ..registry import get_task, task_spec

    options = {"model.name": args.model, "model.trust_remote_code": args.trust_remote_code}
    cfg = command_config(args.overrides, ("model", "sampler"), options)
    trained = run_canvas(cfg.model.name)
    if trained and not any(o.split("=")[0] in CANVAS_KEYS for o in args.overrides):
        cfg = command_config(args.overrides, ("model", "sampler"), options, base=apply(RunConfig(), {"sampler": trained[0]}))
        print(f"canvas from {trained[1]}: " + " ".join(f"sampler.{k}={v}" for k, v in trained[0].items()), file=sys.stderr)
    task = get_task(args.task, split=args.split, n=args.n, seed=args.seed)
    samples = list(task.samples)[: args.n]
    check(cfg.sampler, "sampler")
    adapter = load_model(cfg.model)
    if task_spec(args.task).tiny:  # the gold is the whole answer: the canvas must hold it and EOS
        cfg = _fitting_canvas(cfg, task, adapter, args.task, chosen=bool(trained) or any(
            o.split("=")[0] in CANVAS_KEYS for o in args.overrides))
    check_fits(adapter, [s.prompt for s in samples], [cfg.sampler.gen_length], "sampler.gen_length")
    sink = open(args.output, "w") if args.output else sys.stdout  # a bad output path fails before the work
    if cfg.model.name == "tiny":
        print(f"note: model tiny is built with random weights (model.seed={cfg.model.seed}): its completions are "
              "noise; give a trained model folder (e.g. --model runs/sft-tiny/final) for real ones", file=sys.stderr)
    adapter.model.to(default_device()).eval()
    batch = sample(adapter, [s.prompt for s in samples], cfg.sampler, seed=args.seed)
    for i, s in enumerate(samples):
        r = task.verify(s, batch.texts[i])
        row = {"id": s.id, "prompt": s.prompt, "completion": batch.texts[i], "reward": r.as_json_value(),
               "status": r.status, "commit_step": batch.trajectory.commit_step[i].tolist(),
               "commit_logp": [round(v, 5) for v in batch.trajectory.commit_logp[i].tolist()]}
        sink.write(json.dumps(row) + "\n")
    if args.output:
        sink.close()
        print(f"wrote {len(samples)} completions to {args.output} ({batch.forward_passes} forward passes)")
    return 0
