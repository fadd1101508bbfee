"""`daca-bench cost`: each arm's FLOPs per training step, predicted from its config before anything
runs, counted by the same `FlopCounterMode` as the ledger (rl/ledger.py) on a copy of the model on the
meta device (shapes only: no weights, no memory; LLaDA-8B, Dream-7B, SDAR-8B and LLaDA2.0-mini at their published
sizes; a MoE layer's routed experts counted as each token through its k experts).

    daca-bench cost --preset tiny                            # the preset's arms, per step and per cell
    daca-bench cost --config configs/paper/llada_gsm8k.yaml  # baseline vs +DACA at the paper's shape
    daca-bench cost --config configs/paper/sdar_gsm8k.yaml   # a block model: block-cached rollout, two streams

A step is modelled as the trainer runs it (train/trainer.py): the rollout's `rollout.steps` denoising
passes over the B*G canvases of prompt + completion (cache none; a cached or threshold rollout is
measured by the ledger, not predicted here; a block model's exact block cache is: `block_rollout`); the old-policy passes (mu - 1 draws, or none when every
inner iteration scores the same canvases or the base reads no ratio) and the reference passes (beta >
0) over K' * B*G canvases (K' = min(K, L) strata; causal strata no more than a rollout's denoising steps,
per block on a block model, as rl/strata.py clamps them), without gradient; and mu updates, forward and
backward, over the same K' * B*G canvases. FLOPs are linear in the rows of a pass, so one canvas of
each kind is counted and multiplied. The prompt length P is the longest of the first batch's prompts
(tiny tasks have one prompt format) or, for the paper presets, `train.max_prompt_length`. A block model's
likelihood canvas is its two streams, P + 2L - B tokens (archs/block.py).
"""

from __future__ import annotations

import sys
from dataclasses import replace

import torch

from ...config import RLConfig, load_config
from ...errors import UnavailableError
from ...rl.ledger import flop_counter

PHASES = ("rollout", "likelihood_old", "likelihood")
PAPER_FAMILIES = {
    "llada2": "llada2",
    "llada": "llada",
    "dream": "dream",
    "sdar": "sdar",
    "trado": "sdar",
}  # name part -> family, the longest first: llada2 before llada


def meta_model(cfg: RLConfig) -> torch.nn.Module:
    """The policy's architecture on the meta device: the tiny BERT, or LLaDA / Dream at the published
    config (by the name in model.name), with LoRA and gradient checkpointing as the config sets them."""
    from ...chars import build_char_tokenizer
    from ...models import build_tiny_model

    name = (cfg.model.name or "").lower()
    with torch.device("meta"):
        if cfg.model.name == "tiny" or (cfg.train.init and cfg.model.name == "tiny"):
            model = build_tiny_model(cfg.model, build_char_tokenizer())
        else:
            family = next((PAPER_FAMILIES[f] for f in PAPER_FAMILIES if f in name), None)
            if family is None:
                raise UnavailableError(
                    f"daca-bench cost: no shape known for model {cfg.model.name!r}; it models the "
                    "tiny model and LLaDA / Dream / SDAR (8B) / LLaDA2.0-mini at their published sizes"
                )
            from ...archs import NATIVE, LLaDA2MoeConfig, LLaDA2MoeModelLM
            from ...testing.paper import FIELDS

            if family == "llada2":  # LLaDA2.0-mini: the native config's defaults are its published fields
                model = LLaDA2MoeModelLM(LLaDA2MoeConfig())
            else:
                model_cls = NATIVE[family]
                fields = {k: v for k, v in FIELDS[family].items() if k != "model_type"}
                model = model_cls(model_cls.config_class(**fields))
    if cfg.train.lora:
        from peft import LoraConfig, get_peft_model

        from ...engine.policy import lora_targets

        model = get_peft_model(
            model,
            LoraConfig(
                r=cfg.train.lora_r,
                lora_alpha=cfg.train.lora_alpha,
                target_modules=lora_targets(cfg.train.lora_target_modules),
            ),
        )
    if cfg.train.gradient_checkpointing:
        from ...engine.memory import enable_gradient_checkpointing

        enable_gradient_checkpointing(model)
    return model


def _count(model, seq: int, grad: bool, adapter_off: bool = False, window: tuple[int, int] | None = None) -> float:
    """FLOPs of one canvas of `seq` tokens: a forward (grad=False), or forward and backward; with `window`
    (lo, hi), a block model's cached pass over positions lo..hi-1 against the keys of 0..hi-1 (its
    filling pass over 0..lo-1 is not counted)."""
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    kw = {}
    if window is not None:
        from ...archs.common import KVCache

        kw["past_key_values"] = cache = KVCache()
        with torch.no_grad():
            _forward(model, ids[:, : window[0]], past_key_values=cache)
        cache.window, ids = window, ids[:, window[0] : window[1]]
        kw["position_ids"] = torch.arange(*window, device="meta")[None]
    off = model.disable_adapter() if adapter_off and hasattr(model, "disable_adapter") else None
    with flop_counter() as counter, torch.set_grad_enabled(grad):
        if off is not None:
            off.__enter__()
        try:
            logits = _forward(model, ids, **kw)
            if grad:
                logits.float().sum().backward()
        finally:
            if off is not None:
                off.__exit__(None, None, None)
    return float(counter.get_total_flops())


def _forward(model, ids, past_key_values=None, position_ids=None) -> torch.Tensor:
    """Logits of one pass; a cached pass of the tiny BERT runs as the sampler runs it (archs/bert.py)."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    if past_key_values is not None and getattr(core.config, "model_type", "") == "bert":
        from ...archs.bert import bert_cached

        lo = past_key_values.window[0] if past_key_values.window else 0
        positions = (
            position_ids if position_ids is not None else torch.arange(lo, lo + ids.shape[1], device=ids.device)[None]
        )
        return bert_cached(core, ids, None, positions, past_key_values)
    kw = {} if past_key_values is None else {"past_key_values": past_key_values}
    out = model(input_ids=ids, **kw, **({} if position_ids is None else {"position_ids": position_ids}))
    return out.logits if hasattr(out, "logits") else out[0]


def prompt_length(cfg: RLConfig) -> int:
    """P: the padded prompt length of a step (the first batch's longest prompt; the paper presets' cut)."""
    t = cfg.train
    if t.max_prompt_length:
        return t.max_prompt_length
    from ...chars import build_char_tokenizer
    from ...registry import get_task

    if cfg.model.name != "tiny":
        raise UnavailableError("daca-bench cost: set train.max_prompt_length to model the prompt of a hub model")
    drawn = get_task(t.task, split="train", n=t.n_train, seed=t.seed, protocol=t.protocol)
    samples = list(drawn.samples)[: t.prompts_per_step]
    tok = build_char_tokenizer()
    return max(len(tok(s.prompt)["input_ids"]) for s in samples)


def step_flops(cfg: RLConfig, model=None) -> dict:
    """Predicted FLOPs per training step, per phase, and the step's canvases (B*G) and strata K'."""
    from ...rl.bases import ratio_free
    from ...rl.strata import CAUSAL
    from ...train.trainer import same_masks

    refuse = UnavailableError(
        "daca-bench cost models uncached schedule rollouts (rollout.cache=none, no threshold) and a block "
        "model's exact block cache (rollout.cache=block); the ledger in each cell's summary measures the others"
    )
    if cfg.rollout.cache not in ("none", "block") or cfg.rollout.threshold is not None:
        raise refuse
    model = model if model is not None else meta_model(cfg)
    block = block_of(model) or (cfg.model.block_size if cfg.model.name == "tiny" else 0)  # the tiny: its adapter's
    if cfg.rollout.cache == "block" and not block:
        raise refuse
    if cfg.loss.base not in ("grpo", "gspo", "reinforce_pp"):
        raise UnavailableError(
            f"daca-bench cost models grpo, gspo and reinforce_pp (SML likelihood); loss.base="
            f"{cfg.loss.base} has its own estimator: read its cells' ledgers"
        )
    t, L = cfg.train, cfg.rollout.gen_length
    S = prompt_length(cfg) + L
    lik = S + L - block if block else S  # a block model scores every block at once: two streams (archs/block.py)
    rows = t.prompts_per_step * t.num_generations
    strata = min(cfg.sml.k, L)
    if cfg.sml.partition in CAUSAL:  # causal strata are clamped to the fewest denoising steps (rl/strata.py)
        strata = min(strata, cfg.rollout.steps // (L // block) if block else cfg.rollout.steps)
    draws = 1 if same_masks(cfg) else t.mu  # as the trainer decides it
    old = 0 if ratio_free(cfg) else draws - 1
    ref = draws if cfg.loss.beta > 0 else 0
    fwd = _count(model, lik, grad=False)
    ref_fwd = _count(model, lik, grad=False, adapter_off=t.lora) if ref else 0.0
    rollout = (
        block_rollout(model, S - L, L, block, cfg.rollout.steps)
        if cfg.rollout.cache == "block"
        else cfg.rollout.steps * _count(model, S, grad=False)
    )
    return {
        "rollout": rows * rollout,
        "likelihood_old": strata * rows * (old * fwd + ref * ref_fwd),
        "likelihood": t.mu * strata * rows * _count(model, lik, grad=True),
        "canvas": S,
        "rows": rows,
        "strata": strata,
    }


def block_of(model) -> int:
    """The block length of a block model (its config's key, archs.BLOCK_KEYS), 0 for full attention."""
    from ...archs import block_size_of

    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    return block_size_of(core.config)


def block_rollout(model, P: int, L: int, B: int, steps: int) -> float:
    """FLOPs of one row's rollout with the exact block cache (archs/block.py's `block_step`): block 0 opens
    with a pass over the prompt and itself, every later block with a pass over the finished block before it
    and itself; each block's other steps / (L / B) - 1 passes run the block alone against the cache. A
    window pass's FLOPs are affine in its end (the keys it reads), so two ends give every block's."""
    n, per = L // B, steps // (L // B)
    first = _count(model, P + B, grad=False)
    if n == 1:
        return first + (per - 1) * _count(model, P + B, grad=False, window=(P, P + B))
    ends = (P + 2 * B, P + L)  # the second block's end and the last's
    two = [_count(model, e, grad=False, window=(e - 2 * B, e)) for e in ends]
    one = [_count(model, e, grad=False, window=(e - B, e)) for e in ends]
    solo0 = _count(model, P + B, grad=False, window=(P, P + B))
    later = (n - 1) * ((two[0] + two[1]) / 2 + (per - 1) * (one[0] + one[1]) / 2)  # blocks 1..n-1: the mean end
    return first + (per - 1) * solo0 + later


MEASURES = ("flops", "samples", "seconds")  # what a compute-matched design matches arms by (it says which)


def matched_steps(
    base_cfg, daca_cfg, base_steps: int = 32, measure: str = "flops", cells: str | None = None
) -> tuple[int, float]:
    """(the baseline's steps at +DACA@BASE_STEPS's compute, the ratio per step) by MEASURE: "flops",
    training FLOPs from the cost model on the two arms' configs; "samples", completions per step
    (B x G; equal arms: 1); "seconds", training seconds per step measured on finished CELLS
    (bases_grid.measured_cost_ratio: a machine's clock, the measure tiny-bases used)."""
    from ...config import pick

    pick({m: m for m in MEASURES}, measure, "the compute measure")
    if measure == "flops":
        b, d = step_flops(base_cfg), step_flops(daca_cfg)
        ratio = sum(d[p] for p in PHASES) / sum(b[p] for p in PHASES)
    elif measure == "samples":
        per = lambda c: c.train.prompts_per_step * c.train.num_generations  # noqa: E731
        ratio = per(daca_cfg) / per(base_cfg)
    else:
        from .bases_grid import measured_cost_ratio

        if not cells:
            raise UnavailableError("matching by seconds needs finished cells of both arms to time (cells=FOLDER)")
        ratio = measured_cost_ratio(cells)
    return max(base_steps, round(base_steps * ratio)), ratio


def arms(preset_name: str | None, config: str | None) -> list[tuple[str, str, RLConfig]]:
    """(group, variant, config) per arm: a tiny preset's variants per family (and setting), seed 0; or
    a config's baseline and +DACA (sml.k=4 dps.enabled=true)."""
    if config:
        cfg = load_config(config, [], RLConfig)
        return [("", "baseline", cfg), ("", "+DACA", load_config(config, ["sml.k=4", "dps.enabled=true"], RLConfig))]
    from .pipeline import tiny_cells
    from .presets import PRESETS, TinyPreset

    preset = PRESETS.get(preset_name)
    if not isinstance(preset, TinyPreset):
        raise UnavailableError(
            f"daca-bench cost --preset {preset_name}: a tiny preset, or --config FILE for a paper "
            f"config; tiny presets: {', '.join(k for k, v in PRESETS.items() if isinstance(v, TinyPreset))}"
        )
    sft = {label: {"folder": "sft"} for label in preset.families}
    block = {fam.task: fam.block for fam in preset.families.values()}  # a cell loads it from its SFT folder
    seen, out = set(), []
    for cell in tiny_cells(preset, sft, seeds=[0]):
        group = " ".join(str(cell.axes[k]) for k in ("loss.base", "train.task", "setting") if k in cell.axes)
        if (group, cell.axes["variant"]) not in seen:
            seen.add((group, cell.axes["variant"]))
            c = cell.config
            model = replace(c.model, block_size=block.get(c.train.task, 0) or c.model.block_size)
            out.append((group, cell.axes["variant"], replace(c, model=model, train=replace(c.train, init=""))))
    return out


def configure(parser) -> None:
    parser.add_argument("--preset", default="tiny", help="a tiny preset (daca-bench reproduce --list)")
    parser.add_argument(
        "--config", default=None, help="a training config instead (e.g. configs/paper/llada_gsm8k.yaml)"
    )


def run(args) -> int:
    rows = []
    for group, variant, cfg in arms(args.preset, args.config):
        try:
            f = step_flops(cfg)
        except UnavailableError as exc:
            print(f"{group} {variant}: {exc}", file=sys.stderr)
            continue
        rows.append((group, variant, f, sum(f[p] for p in PHASES), cfg.train.steps))
    if not rows:
        return 2
    base = {g: tot for g, v, _, tot, _ in rows if v == "baseline"}
    print("| arm | rollout | old + ref | update | per step | rollout share | vs its baseline | per cell |")
    print("|---|---|---|---|---|---|---|---|")
    for group, variant, f, total, steps in rows:
        ratio = f"{total / base[group]:.2f}x" if base.get(group) else "-"
        print(
            f"| {f'{group} {variant}'.strip()} | {f['rollout']:.3g} | {f['likelihood_old']:.3g} | "
            f"{f['likelihood']:.3g} | {total:.3g} | {f['rollout'] / total:.0%} | {ratio} | {total * steps:.3g} |"
        )
    print(
        f"\nFLOPs counted by torch.utils.flop_counter on the meta device; canvas {rows[0][2]['canvas']} tokens, "
        f"{rows[0][2]['rows']} rows per step (docs/method.md, 'What DACA costs')."
    )
    return 0
