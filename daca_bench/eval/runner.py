"""The evaluation runner behind `daca-bench eval`: a checkpoint on a task at one or more generation
lengths, under one or more protocols (protocols.py; docs/evaluation.md), resumable in its output folder.

    run_eval("tiny", "arithmetic", ["d1", "llada"], n=8, gen_lengths=[32], output_dir="runs/eval-x")
    evaluate_lengths(adapter, task, samples, {64: protocol(64)}, Path("runs/eval-x"), chat=False)

Greedy unless `threshold` (parallel decoding); prompts as one user message of the chat template where the
tokenizer has one. A protocol's canvas is its table's unless gen_lengths / block_length / steps say otherwise;
d1's defaults to the canvas the model was trained with where its run folder says. Writes OUTPUT/samples.jsonl
(a row per protocol, length and sample, with step_maps; rows of the same decoding already there are kept),
model.json, summary.{md,csv} and record.json (records.py).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from tqdm.auto import tqdm

from ..canvas import check, check_fits, gold_lengths
from ..config import SamplerConfig
from ..engine.policy import load_trained
from ..errors import ConfigError
from ..models import run_canvas
from . import protocols
from .evaluate import evaluate
from .prompts import load_task, protocol_task
from .records import (
    chat_words,
    claim,
    default_output,
    describe,
    markdown,
    model_identity,
    read_done,
    summarise,
    versions,
    write_summary,
)


def protocol(
    gen_length: int,
    block_length: int = 32,
    steps: int | None = None,
    threshold: float | None = None,
    batch_size: int = 32,
    cache: str = "none",
    name: str = "d1",
    task: str = "",
    temperature: float = 0.0,
) -> SamplerConfig:
    """A protocol's evaluation sampler at one length (d1's: block min(b, L), steps L / 2 unless given); greedy
    unless `temperature` (a decoding of `eval --decode`, axes.py)."""
    L, b, T = protocols.canvas(name, task, gen_length, block_length, steps)
    cfg = SamplerConfig(
        gen_length=L,
        block_length=b,
        steps=T,
        temperature=temperature,
        threshold=threshold,
        batch_size=batch_size,
        cache=cache,
    )
    check(cfg, "--")
    return cfg


def decoding(cfg: SamplerConfig, rule=None, seed: int = 0) -> str:
    """The settings a cached row was decoded with (batch size aside, which changes no completion: each row
    draws its own noise, evaluate.py); the seed where the decoding draws any (temperature > 0, random remasking)."""
    keys = ("gen_length", "block_length", "steps", "temperature", "remasking", "threshold") + (
        ("cache",) if cfg.cache != "none" else ()
    )  # uncached rows keep the key they were stored under
    extra = {"never": list(rule.never), "late": list(rule.late)} if rule else {}
    drawn = {"seed": seed} if cfg.temperature > 0 or cfg.remasking == "random" else {}  # greedy keys as before
    return json.dumps({**{k: getattr(cfg, k) for k in keys}, **extra, **drawn}, sort_keys=True)


def _decoder(adapter, how: str):
    """Completion ids -> text: `to_eos` is the adapter's (up to the first EOS); `skip_special` decodes the
    whole canvas without special tokens, as LLaDA's and DARE's OpenCompass classes do."""
    if how == "to_eos":
        return None
    vocab = len(adapter.tokenizer)
    return lambda ids: adapter.tokenizer.decode([i for i in ids.tolist() if 0 <= i < vocab], skip_special_tokens=True)


def evaluate_lengths(
    adapter,
    task,
    samples,
    cfgs: dict[int, SamplerConfig],
    out: Path,
    chat: bool,
    progress: bool = True,
    name: str = "d1",
    par=None,
    seed: int = 0,
    posed=None,
) -> list[dict]:
    """Sample and score every (length, sample) of protocol `name` not yet in OUTPUT/samples.jsonl; return
    the summary rows. `task`: as the protocol poses it (prompts.load_task); `posed`: with its prompts rendered
    (prompts.protocol_task; built here when not given). Under several processes (`par`) each batch is split
    rank::world and rank 0 writes."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "samples.jsonl"
    done = read_done(path)
    ptask = posed or protocol_task(name, replace(task, samples=samples), adapter, chat, seed)
    posed = {str(s.id): s for s in ptask.samples}
    rank, world = (par.rank, par.world) if par is not None else (0, 1)
    row_of = protocols.row(name, task.name)
    adapter.model.eval()
    for L, cfg in cfgs.items():
        rule = protocols.suppress(name, task.name, adapter, cfg.cache)
        key = decoding(cfg, rule, seed)
        todo = [posed[str(s.id)] for s in samples if (name, L, key, str(s.id)) not in done]
        bar = tqdm(total=len(todo), desc=f"eval {task.name} {name} L={L}", disable=not progress or rank)
        step = cfg.batch_size * world
        for i in range(0, len(todo), step):
            part = todo[i : i + step]
            res = evaluate(
                adapter,
                replace(ptask, samples=part),
                cfg,
                seed=seed,
                par=par,
                rule=rule,
                decode=_decoder(adapter, row_of.decode),
            )
            rows = []
            for s, text, r, steps in zip(part, res["completions"], res["rewards"], res["step_maps"]):
                rows.append(
                    {
                        "id": s.id,
                        "protocol": name,
                        "gen_length": L,
                        "decoding": key,
                        "completion": text,
                        "reward": r.as_json_value(),
                        "status": r.status,
                        "step_maps": steps,
                        **({"d1": r.details["d1"]} if "d1" in r.details else {}),
                        **({"read": r.details["read"]} if "read" in r.details else {}),
                    }
                )
            if rank == 0:
                with open(path, "a") as sink:
                    sink.write("".join(json.dumps(row) + "\n" for row in rows))
            done.update({(name, L, key, str(row["id"])): row for row in rows})
            bar.update(len(part))
        bar.close()
    ids = {str(s.id) for s in samples}
    keys = {L: decoding(cfg, protocols.suppress(name, task.name, adapter, cfg.cache), seed) for L, cfg in cfgs.items()}
    table = summarise(
        [r for (p, L, key, sid), r in done.items() if p == name and sid in ids and L in cfgs and key == keys[L]],
        cfgs,
        name,
    )
    if rank == 0:  # this protocol's table; `run` rewrites it with every protocol's and the record
        write_summary(out, table)
    return table


def canvases(
    name: str,
    task: str,
    model: str,
    lengths=None,
    block: int | None = None,
    steps: int | None = None,
    threshold: float | None = None,
    cache: str | None = None,
    batch_size: int = 32,
    temperature: float = 0.0,
) -> dict[int, SamplerConfig]:
    """The protocol's sampler per length: the given values over the protocol's (d1: over the canvas of the
    run that trained MODEL)."""
    trained = run_canvas(model) if name == "d1" else None
    if trained and lengths is None and block is None and steps is None:
        canvas, source = trained
        lengths, block, steps = [canvas["gen_length"]], canvas["block_length"], canvas["steps"]
        print(
            f"canvas from {source}: --gen-length {lengths[0]} --block-length {block} --steps {steps}", file=sys.stderr
        )
    chosen = cache or protocols.row(name, task).cache
    protocols.check_options(name, cache or "none", threshold)
    cfgs = [
        protocol(L, block, steps, threshold, batch_size, chosen, name, task, temperature) for L in lengths or [None]
    ]
    return {cfg.gen_length: cfg for cfg in cfgs}


def chat_used(adapter, model: str, requested: str) -> bool:
    """Whether the prompts go through the chat template: `on` needs one (else one ConfigError line, as the
    trainer's train.chat_template=true), `off` never, `auto` where the tokenizer has one (record.json and the
    summary say which it was)."""
    has = bool(getattr(adapter.tokenizer, "chat_template", None))
    if requested == "on" and not has:
        raise ConfigError(
            f"--chat-template on (--templates chat): {model}'s tokenizer has no chat template; "
            "use --chat-template off or auto (--templates plain)"
        )
    return requested == "on" or (requested == "auto" and has)


def run_eval(
    model: str,
    task: str,
    names: list[str],
    *,
    base: str = "",
    split: str = "test",
    n: int | None = None,
    gen_lengths=None,
    block_length: int | None = None,
    steps: int | None = None,
    threshold: float | None = None,
    cache: str | None = None,
    batch_size: int = 32,
    chat_template: str = "auto",
    trust_remote_code: bool = False,
    dtype: str = "float32",
    seed: int = 0,
    output_dir: str | None = None,
    fresh: bool = False,
    progress: bool = True,
    temperature: float = 0.0,
) -> list[dict]:
    """Evaluate MODEL on TASK under each protocol of NAMES (protocols.parse) and write OUTPUT (the module's
    docstring); return the summary rows. Under torchrun each process decodes rows rank::world."""
    from ..engine.parallel import Parallel, init_process_group, rank_and_world
    from ..models import default_device
    from ..registry import task_spec

    plans = {
        name: canvases(name, task, model, gen_lengths, block_length, steps, threshold, cache, batch_size, temperature)
        for name in names
    }
    init_process_group()
    rank, world = rank_and_world()
    par = Parallel("none", rank, world) if world > 1 else None
    tasks = {name: load_task(name, task, split=split, n=n, seed=seed) for name in plans}
    chosen = {name: list(t.samples)[:n] if n else list(t.samples) for name, t in tasks.items()}
    adapter = load_trained(model, trust_remote_code, dtype, base)
    adapter.model.to(default_device())
    chat = chat_used(adapter, model, chat_template)
    posed = {
        name: protocol_task(name, replace(t, samples=chosen[name]), adapter, chat, seed) for name, t in tasks.items()
    }
    for name, cfgs in plans.items():
        check_fits(adapter, [s.prompt for s in posed[name].samples], sorted(cfgs), "--gen-length")
    if task_spec(task).tiny:  # the gold is the whole answer: every canvas must hold it and EOS
        for name, cfgs in plans.items():
            gold = gold_lengths(tasks[name], adapter.encode)
            for cfg in cfgs.values():
                check(cfg, "--", gold, task, eos=False)
    out = Path(output_dir) if output_dir else default_output(task, model)
    if rank == 0:
        claim(out, model_identity(model, base, dtype, chat), fresh=fresh)
    if par is not None:
        par.barrier()
    table = []
    for name, cfgs in plans.items():
        table += evaluate_lengths(
            adapter,
            tasks[name],
            chosen[name],
            cfgs,
            out,
            chat,
            progress=progress,
            name=name,
            par=par,
            seed=seed,
            posed=posed[name],
        )
    rules = {
        m: {L: protocols.suppress(m, task, adapter, c.cache) for L, c in cfgs.items()} for m, cfgs in plans.items()
    }
    record = {
        "protocols": {
            m: {L: json.loads(decoding(c, rules[m][L], seed)) for L, c in cfgs.items()} for m, cfgs in plans.items()
        },
        "task": task,
        "split": split,
        "n": len(next(iter(chosen.values()))),
        "ids": {m: [str(s.id) for s in chosen[m]] for m in plans},  # the prompts the summary counts
        "model": model,
        "device": str(adapter.device),
        "dtype": dtype,
        "batch_size": batch_size,
        "processes": world,
        "cache": {m: sorted({c.cache for c in cfgs.values()}) for m, cfgs in plans.items()},
        "threshold": threshold,
        "temperature": temperature,
        "seed": seed,
        "chat_template": chat,  # what the prompts were built with
        "chat_template_requested": chat_template,
        "versions": versions(),
    }
    if rank == 0:
        write_summary(out, table, record)
        print(f"{task} ({split}, {record['n']} samples), model {model}, {chat_words(record)}")
        print(markdown(table))
        print(describe(record))
        print(f"wrote {out / 'samples.jsonl'}, {out / 'summary.md'}, {out / 'summary.csv'}, {out / 'record.json'}")
    return table
