"""Configs: frozen dataclasses hold the defaults, YAML presets in configs/ and dotted CLI
overrides (`sft.lr=1e-3 sampler.steps=16`) are checked against them: an unknown key is an
error that names the close matches, never a silent no-op.

    cfg = load_config("configs/tiny_sft.yaml", ["sft.steps=100"], RunConfig)
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError  # noqa: F401 - raised here, imported from here by many


@dataclass(frozen=True)
class DPSConfig:
    enabled: bool = False
    score: str = "progress"  # progress | surprise | commit_time | random (the control)
    norm: str = "rank"  # score -> weight: rank | zscore | ratio (docs/method.md)
    lam: float = 0.5
    w_min: float = 0.2
    w_max: float = 3.0
    scope: str = "completion"  # what a weight is normalised over: completion | block (each decoding block on its own)


@dataclass(frozen=True)
class LossConfig:
    base: str = "grpo"  # grpo | gspo | reinforce_pp | the field's: wd1 | spg | espo | coupled_grpo | map | tracerl (block models)
    epsilon: float = 0.5  # token clip (d1: 0.5)
    epsilon_seq: float = 4e-4  # sequence clip for gspo
    beta: float = 0.0  # KL coefficient (d1: 0.04)
    scale_rewards: bool = False  # grpo: divide by the group std
    loss_type: str = "grpo"  # token aggregation: grpo (per-sequence mean) | bnpo (d1: batch token mean) | dr_grpo
    norm_rows: int = (
        0  # bnpo's token count: 0 = the whole step's (any GPU count, any grad_accum); n = per n rows (d1: 6)
    )
    std_unbiased: bool = True  # scale_rewards divides by the unbiased group std (TRL, d1); false = population std
    spg_mode: str = "mix"  # spg, A < 0: eubo | mix (w EUBO + (1-w) ELBO: SPG's mitigation of eubo's collapse) | elbo
    spg_beta: float = 1.0  # spg: the EUBO's beta (SPG: 1.0 sudoku, 1.5 gsm8k / math)
    spg_mix: float = 0.5  # spg: the EUBO's weight w in mix
    spg_draws: int = 2  # spg: block-wise mask draws (forward passes) per update (SPG's num_t)
    spg_floor: float = -20.0  # spg collapse guard: a token whose upper bound u_k is below this is pushed no lower
    espo_mc: int = 2  # espo: Monte Carlo mask draws, each a pass and its complement (ESPO's num_mc)
    map_blocks: int = 4  # map: the sampler's steps merged into this many causal blocks (MAP's StepMerge)
    map_lambda: float = 1.0  # map: weight of the unmasking-position term
    trace_shrink: int = 1  # tracerl: distinct commit steps of a block merged into one round (TraceRL's shrink)
    trace_kl: float = 0.01  # tracerl: k3 penalty to the OLD policy (TraceRL's training.beta; loss.beta stays 0)


@dataclass(frozen=True)
class ModelConfig:
    name: str = "tiny"  # "tiny" | a local save_pretrained folder | a hub id
    hidden_size: int = 128  # the tiny model's shape (ignored for a loaded model)
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    max_positions: int = 128
    trust_remote_code: bool = False  # needed for LLaDA / Dream
    dtype: str = "float32"  # float32 | bfloat16 | float16 (the tiny model too)
    seed: int = 0
    block_size: int = (
        0  # block diffusion (archs/block.py): causal across blocks of this many tokens; 0 = full attention
    )


@dataclass(frozen=True)
class SamplerConfig:
    gen_length: int = 8  # completion canvas length L
    block_length: int = 8  # semi-autoregressive block b (L % b == 0)
    steps: int = 8  # denoising steps T in total (a multiple of L / b)
    temperature: float = 0.0  # 0 = greedy; Gumbel noise in float64 otherwise
    remasking: str = "low_confidence"  # low_confidence | random
    threshold: float | None = None  # confidence-threshold parallel decoding (Fast-dLLM); rollout.threshold too
    batch_size: int = 64
    cache: str = (
        "none"  # KV cache: none | prefix (prompt + decoded blocks reused within a block) | dual (+ the masked suffix)
    )
    #                      | block (a block model's exact cache of its finished blocks)


@dataclass(frozen=True)
class SFTConfig:
    task: str = "arithmetic"
    protocol: str = ""  # pose the task as it declares this protocol (d1: d1's prompts and data); "" = its own
    n_train: int | None = None  # None = the task's default size
    n_eval: int = 256
    steps: int = 1500
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 50
    grad_clip: float = 1.0
    eps: float = 1e-3  # t ~ U(eps, 1)
    save_every: int = 250  # steps between checkpoints
    save_total_limit: int = 2  # checkpoints kept (OUTPUT/checkpoint-STEP); the newest always
    eval_every: int = 0  # steps between greedy evaluations on the dev set; 0 = only the final test
    n_dev: int = 256  # dev prompts held out of the train split (used when eval_every > 0)
    target_accuracy: float = 0.0  # stop at the first dev evaluation at or above this; 0 = run all steps
    seed: int = 0
    threads: int = 0  # torch threads; 0 = all cores
    parallel: str = "auto"  # under torchrun: auto (= shard) | replicate | shard | hybrid; one process: none
    offload: bool = False  # FSDP2 CPU offload of the sharded weights, gradients and optimizer state


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    output_dir: str = "runs/sft-tiny"


@dataclass(frozen=True)
class SMLConfig:
    k: int = 1  # strata; 1 = d1's mean-field estimator (the baseline)
    partition: str = "random"  # random | strided | commit_order | causal (the decode order: each token scored with the tokens committed before it)
    p_mask_prompt: float = 0.0  # d1 used 0.15
    chunk: int = 0  # rows per forward pass of the K*N canvases; 0 = all at once (on CUDA: sized from free memory)
    logit_chunk: int = 1024  # tokens per float32 log-softmax chunk; 0 = all at once


@dataclass(frozen=True)
class TrainConfig:
    task: str = "arithmetic"
    protocol: str = ""  # pose the task as it declares this protocol (d1: d1's prompts, data, verdict); "" = its own
    init: str = ""  # a save_pretrained folder (e.g. an SFT run's final/); "" = model.name
    steps: int = 100
    prompts_per_step: int = 8  # B prompts, each sampled num_generations times
    num_generations: int = 8  # G
    mu: int = 1  # inner updates per rollout batch
    lr: float = 5e-5
    weight_decay: float = 0.0
    adam_beta1: float = 0.9  # AdamW beta1 (d1: 0.9)
    adam_beta2: float = 0.999  # d1: 0.99
    warmup_steps: int = 0
    grad_clip: float = 1.0
    grad_accum: int = 1  # micro-batches per update
    gradient_checkpointing: bool = False  # recompute activations in the backward pass (paper presets)
    chat_template: bool = False  # wrap each prompt as a user message with the tokenizer's chat template (d1)
    n_train: int | None = None
    n_eval: int = 256
    eval_every: int = 0  # 0 = only at the end
    save_every: int = 25
    save_total_limit: int = 2  # checkpoints kept (OUTPUT/checkpoint-STEP); the newest always
    seed: int = 0  # the run's seed: train prompts and their order, rollout noise, SML masks
    test_seed: int = 0  # the test set's seed, apart from `seed`: every cell of a grid is scored on one set
    eval_split: str = "test"  # the split scored at the end: test | dev (disjoint from test: for choosing readings)
    test_exclude: str = ""  # a file of prompt ids the test set skips (registry.draw_test): prompts scored before
    reward: str = "exact"  # training reward: exact | dense (the task's partial credit) | d1; the test stays exact
    precision: str = (
        "auto"  # autocast: auto (bf16 rollouts where the hardware has it, bf16 updates on CUDA) | bf16 | fp32
    )
    threads: int = 0
    lora: bool = False
    lora_r: int = 128
    lora_alpha: int = 64
    lora_dropout: float = 0.0  # d1: 0.05
    disable_dropout: bool = (
        True  # dropout off during RL (TRL's disable_dropout): old, current and reference passes agree
    )
    report_to: str = "none"  # none | tensorboard | wandb, or a list: tensorboard,wandb
    require_gpu: bool = False  # paper-scale presets: stop at once on a machine without CUDA
    # d1 parity (docs/paper-presets.md):
    max_prompt_length: int = 0  # keep the last N tokens of each training prompt (d1: 200); 0 = whole prompts
    lora_target_modules: str = "all-linear"  # LoRA targets: all-linear, or module names joined by commas (d1: q_proj,k_proj,v_proj,o_proj,up_proj,down_proj,gate_proj)
    load_in_4bit: bool = False  # LoRA base in bitsandbytes 4-bit NF4, as d1 (needs CUDA and bitsandbytes)
    # several GPUs (docs/trainer.md, "Scaling out"): torchrun --nproc_per_node N -m daca_bench train ...
    parallel: str = "auto"  # auto | none | replicate (LoRA) | shard (full fine-tuning) | hybrid (shard per node)
    offload: bool = False  # FSDP2 CPU offload of the sharded weights, gradients and optimizer state


@dataclass(frozen=True)
class GuardConfig:
    """Collapse guards of the rollouts (daca_bench/train/guards.py); None = no bound."""

    action: str = "warn"  # warn | stop (checkpoint and stop the run)
    patience: int = 3  # consecutive steps over a bound before acting
    max_fallback_frac: float | None = None  # steps committing only their forced token (threshold rollouts)
    max_fallback_entropy: float | None = 4.0  # nats; threshold-rollout GRPO that collapsed rose from < 1.5 to > 4
    max_commit_entropy: float | None = None  # nats, mean over committed tokens
    min_distinct_frac: float | None = None  # distinct completions per group / G
    max_zero_std: float | None = None  # groups whose rewards all agree


@dataclass(frozen=True)
class RLConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: SamplerConfig = field(default_factory=lambda: SamplerConfig(temperature=0.9))
    eval: SamplerConfig = field(default_factory=SamplerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sml: SMLConfig = field(default_factory=SMLConfig)
    dps: DPSConfig = field(default_factory=DPSConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    output_dir: str = "runs/train-tiny"


def _known_keys(cls, prefix="") -> list[str]:
    keys = []
    for f in fields(cls):
        sub = _dataclass_type(cls, f)
        keys += _known_keys(sub, f"{prefix}{f.name}.") if sub else [prefix + f.name]
    return keys


def _dataclass_type(cls, f):
    t = typing.get_type_hints(cls)[f.name]
    return t if is_dataclass(t) else None


def _unknown(key: str, cls) -> ConfigError:
    known = _known_keys(cls)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    tail = key.split(".")[-1]
    close += [k for k in known if k.split(".")[-1] == tail and k not in close]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ConfigError(f"unknown config key {key!r}{hint}")


def _coerce(value: Any, tp, key: str):
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: cannot read {value!r} as {tp}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp in (int, float, str):
        try:
            if tp is int and not isinstance(value, int):
                as_float = float(value)
                if not as_float.is_integer():
                    raise ValueError
                return int(as_float)
            return tp(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r}") from None
    if origin in (list, tuple):
        if isinstance(value, str):
            value = yaml.safe_load(value)
        return origin(value)
    return value


def apply(cfg, updates: dict[str, Any], root=None, prefix=""):
    """Return a copy of `cfg` with nested `updates` applied (dicts or dotted keys)."""
    root = root or type(cfg)
    changes = {}
    flat: dict[str, Any] = {}
    for k, v in updates.items():
        head, _, rest = k.partition(".")
        if rest:
            flat.setdefault(head, {})[rest] = v
        else:
            flat[head] = v if not isinstance(v, dict) else {**flat.get(head, {}), **v}
    names = {f.name: f for f in fields(cfg)}
    for k, v in flat.items():
        if k not in names:
            raise _unknown(prefix + k, root)
        sub = _dataclass_type(type(cfg), names[k])
        if sub:
            if not isinstance(v, dict):
                raise ConfigError(f"{prefix}{k} is a section; set {prefix}{k}.KEY=VALUE")
            changes[k] = apply(getattr(cfg, k), v, root, f"{prefix}{k}.")
        else:
            changes[k] = _coerce(v, typing.get_type_hints(type(cfg))[k], prefix + k)
    return replace(cfg, **changes)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not KEY=VALUE (e.g. sft.lr=1e-3)")
        k, v = item.split("=", 1)
        out[k.strip()] = yaml.safe_load(v) if v.strip() else ""
    return out


# TRL's GRPOConfig names accepted in RL overrides: name -> (our key, value translation or None)
TRL_ALIASES = {
    "num_iterations": ("train.mu", None),
    "learning_rate": ("train.lr", None),
    "max_grad_norm": ("train.grad_clip", None),
    "gradient_accumulation_steps": ("train.grad_accum", None),
    "max_steps": ("train.steps", None),
    "num_generations": ("train.num_generations", None),
    "beta": ("loss.beta", None),
    "epsilon": ("loss.epsilon", None),
    "importance_sampling_level": ("loss.base", {"token": "grpo", "sequence": "gspo"}),
    "scale_rewards": ("loss.scale_rewards", {"group": True, "none": False, True: True, False: False}),
}


def trl_aliases(updates: dict[str, Any]) -> dict[str, Any]:
    """RL overrides with TRL's names (learning_rate=1e-5, importance_sampling_level=sequence,
    scale_rewards=group, ...) rewritten to our keys; a value TRL allows but we do not is an error."""
    out = {}
    for key, value in updates.items():
        if key not in TRL_ALIASES:
            out[key] = value
            continue
        ours, values = TRL_ALIASES[key]
        if values is not None:
            if not isinstance(value, (str, bool)) or value not in values:
                allowed = ", ".join(str(v).lower() for v in values)
                raise ConfigError(f"{key}={value!r} (TRL's name for {ours}) is not supported; choose from {allowed}")
            value = values[value]
        if ours in updates:
            raise ConfigError(f"{key} is TRL's name for {ours}; set one of them, not both")
        out[ours] = value
    return out


def _preset_path(path: str | Path) -> Path:
    """`path` itself, or for a missing `configs/...` path the preset shipped with the package."""
    path = Path(path)
    if not path.exists() and not path.is_absolute() and path.parts[:1] == ("configs",):
        from .resources import data_dir

        shipped = data_dir("configs").joinpath(*path.parts[1:])
        if shipped.exists():
            return shipped
    return path


def load_config(path: str | Path | None, overrides: list[str] | None = None, cls=RunConfig):
    cfg = cls()
    if path:
        data = read_yaml(_preset_path(path), "config") or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of config keys")
        try:
            cfg = apply(cfg, data)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    updates = parse_overrides(overrides or [])
    if cls is RLConfig:
        updates = trl_aliases(updates)
    return apply(cfg, updates)


def read_yaml(path: str | Path, what: str = "config"):
    """A YAML file's data; a missing, unreadable or malformed file is a ConfigError naming it."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{path} is a folder; give the {what} YAML file")
    try:
        return yaml.safe_load(p.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what} file; check the path") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML{at}: {problem}; fix the {what} file") from None


def command_config(overrides: list[str], sections: tuple[str, ...], options: dict[str, Any] | None = None, base=None):
    """The RunConfig of a command that reads only some sections (`sample`: model, sampler).

    `options` are the command's own flags as dotted keys (`{"model.name": args.model}`; None = not
    given), applied before the KEY=VALUE overrides. An override outside `sections` is an error
    naming the keys the command takes; so is a key set both by a flag and by an override."""
    keys = [k for k in _known_keys(RunConfig) if k.split(".")[0] in sections]
    updates = parse_overrides(overrides)
    for key in updates:
        if key.split(".")[0] not in sections:
            raise ConfigError(f"{key} is not used by this command; it takes {', '.join(keys)}")
    given = {k: v for k, v in (options or {}).items() if v is not None}
    both = sorted(given.keys() & updates.keys())
    if both:
        raise ConfigError(f"{both[0]} is set both by an option and by an override; set it once")
    return apply(apply(base or RunConfig(), given), updates)


def to_dict(cfg) -> dict:
    return dataclasses.asdict(cfg)


def dump(cfg, path: Path) -> None:
    Path(path).write_text(json.dumps(to_dict(cfg), indent=2) + "\n")


def pick(table: dict, name: str, key: str):
    """table[name], or a ConfigError naming `key` and the close matches."""
    if name not in table:
        close = difflib.get_close_matches(name, list(table), n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ConfigError(f"{key}={name!r} is not known; {hint}choose from {', '.join(table)}")
    return table[name]
