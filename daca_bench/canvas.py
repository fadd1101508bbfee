"""Canvas checks, run before any work: a sampler's canvas must decode (gen_length a multiple of
block_length, steps a multiple of the blocks) and hold a task's longest gold answer plus EOS
(SFT, RL) or at least the answer (`sample`, `eval`: a canvas decoded whole is scored whole).

    check(cfg.sampler, "sampler", gold=gold_lengths(task, adapter.encode), task=task.name)
    check_rl(cfg)   # rollout and eval canvases of a train config (trainer.validate)
    check_fits(adapter, prompts, [256], "--gen-length")   # prompt + canvas within the model's positions

Every failure is one ConfigError naming the keys and a value that works.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .config import SamplerConfig
from .errors import ConfigError


def _key(prefix: str, name: str) -> str:
    """`sampler.gen_length`, or `--gen-length` for a command whose canvas comes from options."""
    return f"--{name.replace('_', '-')}" if prefix == "--" else f"{prefix}.{name}"


def gold_lengths(task, encode) -> list[int]:
    """Token counts of the task's gold answers (empty golds, as hub tasks without one, left out)."""
    targets = [s.target for s in task.samples if s.target]
    return [len(ids) for ids in encode(targets)] if targets else []


def check(cfg: SamplerConfig, prefix: str, gold: list[int] | None = None, task: str = "", eos: bool = True) -> None:
    """Raise one ConfigError when the canvas cannot decode, or cannot hold the longest gold answer + EOS
    (`eos=False`: the answer alone, enough to score a canvas decoded whole, as `sample` and `eval` do;
    SFT trains on the EOS and RL's rollouts should have room for it)."""
    L, b, T = cfg.gen_length, cfg.block_length, cfg.steps
    gl, bl, st = (_key(prefix, k) for k in ("gen_length", "block_length", "steps"))
    for name, value in ((gl, L), (bl, b), (st, T)):
        if value < 1:
            raise ConfigError(f"{name}={value} must be at least 1")
    if L % b:
        raise ConfigError(f"{gl}={L} must be a multiple of {bl}={b}: set {bl}={L}, or {gl}={-(-L // b) * b}")
    if cfg.threshold is None and T % (L // b):
        raise ConfigError(
            f"{st}={T} must be a multiple of the {L // b} blocks of {L // b}x{b} tokens: "
            f"set {st}={-(-T // (L // b)) * (L // b)}"
        )
    need = max(gold) + int(eos) if gold else 0
    if need > L:
        fit = -(-need // b) * b
        raise ConfigError(
            f"{gl}={L} cannot hold {task or 'the task'}'s longest gold answer ({max(gold)} tokens)"
            f"{' plus EOS' if eos else ''}; set {gl}={fit} (a multiple of {bl}={b}; {st} a multiple of "
            f"{fit // b})"
        )


POSITION_FIELDS = ("max_position_embeddings", "max_sequence_length", "n_positions")  # BERT/Dream, LLaDA, GPT-2


def positions(config) -> int | None:
    """The most positions a model config allows (an object or a config.json dict); None when it names none."""
    get = config.get if isinstance(config, dict) else lambda k: getattr(config, k, None)
    values = [get(k) for k in POSITION_FIELDS]
    return next((int(v) for v in values if isinstance(v, int) and v > 0), None)


def check_positions(gen_length: int, prompt: int, positions: int | None, key: str, prompt_key: str = "") -> None:
    """One ConfigError when the longest prompt (tokens) plus the canvas exceeds the model's positions."""
    if positions is None or prompt + gen_length <= positions:
        return
    room = positions - prompt
    fix = f"set {key}<={room}" if room > 0 else "shorten the prompts"
    raise ConfigError(
        f"{key}={gen_length} plus the longest prompt ({prompt} tokens) exceeds the model's {positions} "
        f"positions; {fix}{f' (or lower {prompt_key})' if prompt_key else ''}"
    )


def check_fits(adapter, prompts: list[str], lengths, key: str) -> None:
    """`check_positions` for a loaded model: each canvas length in `lengths` plus the longest of `prompts`."""
    limit = positions(adapter.model.config)
    prompt = max((len(ids) for ids in adapter.encode(prompts)), default=0) if limit is not None else 0
    for length in lengths:
        check_positions(length, prompt, limit, key)


def model_positions(name: str, cfg_model) -> int | None:
    """Positions of the model a run starts from, when cheap to read: tiny's model.max_positions, a folder's config.json."""
    if name == "tiny":
        return cfg_model.max_positions
    path = Path(name) / "config.json"
    if not path.is_file():
        return None
    import json

    try:
        return positions(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _tokenizer_encode(name: str, trust_remote_code: bool = False):
    """An encoder for the model a run starts from, when it is cheap to get (tiny, a local folder); else None."""
    if name == "tiny":
        from .chars import build_char_tokenizer

        tok = build_char_tokenizer()
    elif Path(name).is_dir() and any((Path(name) / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")):
        from .models import load_tokenizer

        tok = load_tokenizer(name, trust_remote_code)
    else:
        return None
    return lambda texts: [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def check_rl(cfg) -> None:
    """The rollout and eval canvases of an RLConfig; for a tiny task (whose gold is the whole answer)
    also against its longest gold answer + EOS. A rollout canvas unlike the eval canvas is named
    on stderr: the test evaluation would not decode what training did."""
    from .registry import task_spec, test_set

    gold, name, drawn = None, cfg.train.task, None
    spec = task_spec(name)
    if spec.tiny:
        encode = _tokenizer_encode(cfg.train.init or cfg.model.name, cfg.model.trust_remote_code)
        if encode is not None:
            drawn = test_set(cfg.train)  # drawn once: the gold lengths and the prompt lengths read it
            gold = gold_lengths(drawn, encode)
    check(cfg.rollout, "rollout", gold, name)
    check(cfg.eval, "eval", gold, name)
    start = cfg.train.init or cfg.model.name
    limit = model_positions(start, cfg.model)
    if limit is not None:
        prompt = cfg.train.max_prompt_length
        if not prompt and spec.tiny:
            encode = encode if gold is not None else _tokenizer_encode(start, cfg.model.trust_remote_code)
            if encode is not None:
                texts = [s.prompt for s in (drawn or test_set(cfg.train)).samples]
                prompt = max((len(ids) for ids in encode(texts)), default=0)
        for section, sampler in (("rollout", cfg.rollout), ("eval", cfg.eval)):
            check_positions(sampler.gen_length, prompt, limit, f"{section}.gen_length", "train.max_prompt_length")
    r, e = cfg.rollout, cfg.eval
    if (r.gen_length, r.block_length) != (e.gen_length, e.block_length):
        print(
            f"warning: rollouts use a canvas of {r.gen_length} (block {r.block_length}) but the test evaluation "
            f"{e.gen_length} (block {e.block_length}); set eval.gen_length/eval.block_length/eval.steps to match",
            file=sys.stderr,
        )
