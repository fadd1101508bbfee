"""`daca-bench eval`: a checkpoint on a task at one or more generation lengths, under one or more protocols.

    daca-bench eval --model GSAI-ML/LLaDA-8B-Instruct --trust-remote-code --dtype bfloat16 \\
        --task gsm8k --gen-length 128 256 512 --output-dir runs/eval-llada-gsm8k
    daca-bench eval --model ... --task gsm8k --protocol d1,llada,dare     # side by side
    torchrun --nproc_per_node 8 -m daca_bench eval ...                    # rank r decodes rows r::8

`--protocol` (protocols.py; docs/evaluation.md): d1 (the default, below), llada (LLaDA's OpenCompass
settings: block = length = steps, its EOS rules, its prompts and answer readings) or dare (DARE's); a
protocol's canvas is its table's unless --gen-length / --block-length / --steps say otherwise.

d1's protocol by default: greedy decoding, low-confidence remasking, block 32 (or the whole
canvas when shorter), steps = length / 2, zero-shot prompts wrapped as one user message with
the tokenizer's chat template where it has one. `--threshold 0.9` decodes in parallel
instead (every masked position above the confidence threshold per step). The model is
`tiny`, a save_pretrained folder, a hub id or a LoRA adapter folder (merged into its base).
Writes OUTPUT/samples.jsonl (one row per protocol, length and sample: id, protocol, gen_length, decoding,
completion, reward, status, step_maps: the 1-based step at which each canvas token was committed), skipping rows of the same decoding already there (resumable), OUTPUT/model.json
(the model's identity: path or hub id, a fingerprint of its weights, dtype, chat template; a
folder holding another model's rows is refused, `--fresh` starts over), OUTPUT/summary.{md,csv} (a row
per protocol and length) and OUTPUT/record.json (protocols, device, dtype, batch size, cache, threshold,
seed, processes and package versions: what explains a difference between two evaluations).
OUTPUT defaults to runs/eval-<task>-<model>; the canvas defaults to the one the model was trained
with when its run folder says (`final/` or `checkpoint-STEP/` beside the run's config.json).
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import sys
from pathlib import Path

from tqdm.auto import tqdm

from ...canvas import check, check_fits, gold_lengths
from ...config import SamplerConfig
from ...errors import ConfigError
from ...models import run_canvas
from ...rl.policy import load_trained
from ...rl.evaluate import evaluate
from ...types import record_correct
from . import protocols

COLUMNS = ["protocol", "gen_length", "n", "accuracy", "acc_d1", "infra_failures", "block_length", "steps", "decoding"]


def protocol(gen_length: int, block_length: int = 32, steps: int | None = None, threshold: float | None = None,
             batch_size: int = 32, cache: str = "none", name: str = "d1", task: str = "") -> SamplerConfig:
    """A protocol's greedy evaluation sampler at one length (d1's: block min(b, L), steps L / 2 unless given)."""
    L, b, T = protocols.canvas(name, task, gen_length, block_length, steps)
    cfg = SamplerConfig(gen_length=L, block_length=b, steps=T, temperature=0.0, threshold=threshold,
                        batch_size=batch_size, cache=cache)
    check(cfg, "--")
    return cfg


def decoding(cfg: SamplerConfig, rule=None) -> str:
    """The settings a cached row was decoded with (batch size aside, which changes no completion)."""
    keys = ("gen_length", "block_length", "steps", "temperature", "remasking", "threshold") + \
        (("cache",) if cfg.cache != "none" else ())  # uncached rows keep the key they were stored under
    extra = {"never": list(rule.never), "late": list(rule.late)} if rule else {}
    return json.dumps({**{k: getattr(cfg, k) for k in keys}, **extra}, sort_keys=True)


def _fingerprint(folder: Path) -> str:
    """config.json's bytes and each weight file's name, size and mtime: a retrained folder differs."""
    h = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.name in ("config.json", "adapter_config.json"):
            h.update(path.name.encode() + path.read_bytes())
        elif path.suffix in (".safetensors", ".bin", ".pt", ".pth") and path.is_file():
            st = path.stat()
            h.update(f"{path.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def model_identity(name: str, base: str = "", dtype: str = "float32", chat: bool = False) -> dict:
    """Who produced the rows: the model (a folder's absolute path and fingerprint, a hub id and its cached
    revision, or tiny), a LoRA adapter's base, the dtype and the chat template."""
    folder = Path(name)
    if name != "tiny" and folder.is_dir():
        model, print_ = str(folder.resolve()), _fingerprint(folder)
    else:
        model, print_ = name, ""
        if name != "tiny":
            try:
                from huggingface_hub import try_to_load_from_cache

                cached = try_to_load_from_cache(name, "config.json")
                print_ = Path(cached).parent.name if isinstance(cached, str) else ""  # the snapshot's commit
            except (ImportError, ValueError):
                pass
    return {"model": model, "fingerprint": print_, "base": base, "dtype": dtype, "chat_template": chat}


def default_output(task: str, model: str) -> Path:
    """runs/eval-<task>-<model>: the model's last two path parts (runs/sft-tiny/final -> sft-tiny-final)."""
    parts = Path(model.rstrip("/")).parts[-2:] if model != "tiny" else ("tiny",)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(p for p in parts if p not in ("", ".", "..", "/")))
    return Path("runs") / f"eval-{task}-{slug or 'model'}"


def claim(out: Path, identity: dict, fresh: bool = False) -> None:
    """Make OUTPUT the cache of this model's rows: a new folder (or --fresh) records the identity; a
    folder holding another model's rows is refused in one line."""
    stored, rows = out / "model.json", out / "samples.jsonl"
    if not fresh and rows.exists() and rows.stat().st_size:
        try:
            old = json.loads(stored.read_text())
        except (OSError, ValueError):
            old = None
        if old != identity:
            if not isinstance(old, dict):
                who = "a model it does not name"
            elif old.get("model") != identity["model"]:
                who = f"model {old.get('model')}, not of {identity['model']}"
            else:
                names = {"fingerprint": "weights", "base": "base model", "dtype": "dtype", "chat_template": "chat template"}
                who = f"{identity['model']} with other " + ", ".join(v for k, v in names.items() if old.get(k) != identity[k])
            raise ConfigError(f"{out} holds the rows of {who}; choose another --output-dir, or --fresh to start over there")
    out.mkdir(parents=True, exist_ok=True)
    if fresh:
        rows.unlink(missing_ok=True)
    stored.write_text(json.dumps(identity, indent=2) + "\n")


def read_done(path: Path) -> dict[tuple[str, int, str, str], dict]:
    """Rows already written, keyed by (protocol, gen_length, decoding, sample id); a torn line (an interrupted
    write) is dropped. A row of other decoding settings never stands in for this run's; a row written before
    protocols existed is d1's."""
    done, torn = {}, False
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                torn = True
                continue
            done[(row.get("protocol", "d1"), int(row["gen_length"]), str(row.get("decoding", "")), str(row["id"]))] = row
    if torn:
        path.write_text("".join(json.dumps(r) + "\n" for r in done.values()))
    return done


def summarise(rows: list[dict], cfgs: dict[int, SamplerConfig], name: str = "d1") -> list[dict]:
    out = []
    for length, cfg in cfgs.items():
        mine = [r for r in rows if r["gen_length"] == length]
        scored = [r["reward"] for r in mine if r["reward"] is not None]
        correct = [record_correct(r, "samples.jsonl") for r in mine if r["reward"] is not None]  # the status decides
        d1 = [r["d1"] for r in mine if r["reward"] is not None and r.get("d1")]  # d1's verdict: [correct, total]
        d1_total = sum(t for _, t in d1)
        out.append({"protocol": name, "gen_length": length, "n": len(mine),
                    "accuracy": round(sum(correct) / len(correct), 4) if correct else math.nan,
                    "mean_reward": round(sum(scored) / len(scored), 4) if scored else math.nan,
                    "acc_d1": round(sum(c for c, _ in d1) / d1_total, 4) if d1_total and name == "d1" else "",
                    "infra_failures": len(mine) - len(scored), "block_length": cfg.block_length, "steps": cfg.steps,
                    "decoding": (f"threshold {cfg.threshold}" if cfg.threshold is not None else "greedy")
                    + (f", cache {cfg.cache}" if cfg.cache != "none" else "")})
    return out


def columns(table: list[dict]) -> list[str]:
    """COLUMNS, with the mean reward beside the accuracy where a row's differs (partial credit or shaping)."""
    differs = any(str(r.get("mean_reward")) != str(r["accuracy"]) for r in table if "mean_reward" in r)
    return COLUMNS[:4] + ["mean_reward"] + COLUMNS[4:] if differs else COLUMNS


def markdown(table: list[dict]) -> str:
    cols = columns(table)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in table]
    return "\n".join(lines)


def _decoder(adapter, how: str):
    """Completion ids -> text: `to_eos` is the adapter's (up to the first EOS); `skip_special` decodes the
    whole canvas without special tokens, as LLaDA's and DARE's OpenCompass classes do."""
    if how == "to_eos":
        return None
    vocab = len(adapter.tokenizer)
    return lambda ids: adapter.tokenizer.decode([i for i in ids.tolist() if 0 <= i < vocab], skip_special_tokens=True)


def evaluate_lengths(adapter, task, samples, cfgs: dict[int, SamplerConfig], out: Path, chat: bool,
                     progress: bool = True, name: str = "d1", par=None, seed: int = 0, posed=None) -> list[dict]:
    """Sample and score every (length, sample) of protocol `name` not yet in OUTPUT/samples.jsonl; return
    the summary rows. Under several processes (`par`) each batch is split rank::world and rank 0 writes."""
    from dataclasses import replace

    out.mkdir(parents=True, exist_ok=True)
    path = out / "samples.jsonl"
    done = read_done(path)
    ptask = posed or protocols.protocol_task(name, replace(task, samples=samples), adapter, chat, seed)
    posed = {str(s.id): s for s in ptask.samples}
    rank, world = (par.rank, par.world) if par is not None else (0, 1)
    row_of = protocols.row(name, task.name)
    adapter.model.eval()
    for L, cfg in cfgs.items():
        rule = protocols.suppress(name, task.name, adapter, cfg.cache)
        key = decoding(cfg, rule)
        todo = [posed[str(s.id)] for s in samples if (name, L, key, str(s.id)) not in done]
        bar = tqdm(total=len(todo), desc=f"eval {task.name} {name} L={L}", disable=not progress or rank)
        step = cfg.batch_size * world
        for i in range(0, len(todo), step):
            part = todo[i:i + step]
            res = evaluate(adapter, replace(ptask, samples=part), cfg, par=par, rule=rule,
                           decode=_decoder(adapter, row_of.decode))
            rows = []
            for s, text, r, steps in zip(part, res["completions"], res["rewards"], res["step_maps"]):
                rows.append({"id": s.id, "protocol": name, "gen_length": L, "decoding": key, "completion": text,
                             "reward": r.as_json_value(), "status": r.status, "step_maps": steps,
                             **({"d1": r.details["d1"]} if "d1" in r.details else {}),
                             **({"read": r.details["read"]} if "read" in r.details else {})})
            if rank == 0:
                with open(path, "a") as sink:
                    sink.write("".join(json.dumps(row) + "\n" for row in rows))
            done.update({(name, L, key, str(row["id"])): row for row in rows})
            bar.update(len(part))
        bar.close()
    ids = {str(s.id) for s in samples}
    keys = {L: decoding(cfg, protocols.suppress(name, task.name, adapter, cfg.cache)) for L, cfg in cfgs.items()}
    table = summarise([r for (p, L, key, sid), r in done.items() if p == name and sid in ids and L in cfgs
                       and key == keys[L]], cfgs, name)
    if rank == 0:  # this protocol's table; `run` rewrites it with every protocol's and the record
        write_summary(out, table)
    return table


def versions() -> dict:
    """The packages whose versions can change a number."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("daca-bench", "torch", "transformers", "tokenizers", "peft", "math-verify", "lm-eval"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def write_summary(out: Path, table: list[dict], record: dict | None = None) -> None:
    (out / "summary.md").write_text(markdown(table) + "\n" + ("\n" + describe(record) + "\n" if record else ""))
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns(table), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)
    if record:
        (out / "record.json").write_text(json.dumps(record, indent=2) + "\n")


def describe(record: dict) -> str:
    """One line under the table: where and how the numbers were made."""
    v = record["versions"]
    return (f"protocols {', '.join(record['protocols'])}; device {record['device']}, dtype {record['dtype']}, "
            f"batch {record['batch_size']} x {record['processes']} process(es), cache "
            f"{', '.join(n + ' ' + '/'.join(c) for n, c in record['cache'].items())}, threshold "
            f"{record['threshold']}, seed {record['seed']}; " + ", ".join(f"{k} {x}" for k, x in v.items()))


# ---- CLI: `daca-bench eval` ---------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("--model", default="tiny", help="tiny | a save_pretrained folder | a hub id | a LoRA adapter folder")
    parser.add_argument("--base", default="", help="base model of a LoRA adapter folder that does not name one")
    parser.add_argument("--task", required=True, help="a registered task (see `daca-bench tasks`)")
    parser.add_argument("--protocol", default="d1",
                        help="d1 | llada | dare, or several side by side (d1,llada); docs/evaluation.md")
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=None, help="samples (default: the whole split)")
    parser.add_argument("--gen-length", type=int, nargs="+", default=None,
                        help="one or more canvas lengths (default: the protocol's; d1: the canvas of the run that "
                             "trained --model, else 256)")
    parser.add_argument("--block-length", type=int, default=None, help="default: the protocol's (d1: that run's, else 32)")
    parser.add_argument("--steps", type=int, default=None, help="denoising steps (default: the protocol's; d1: length / 2)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="parallel decoding above this confidence (protocols d1, dare)")
    parser.add_argument("--cache", default=None, choices=("none", "prefix", "dual"),
                        help="KV cache within a block (sampler.cache; docs/method.md section 3.1); default: the "
                             "protocol's (dare: prefix, else none)")
    parser.add_argument("--batch-size", type=int, default=32, help="prompts decoded together (per process)")
    parser.add_argument("--chat-template", choices=("auto", "on", "off"), default="auto",
                        help="wrap prompts as a user message (auto: when the tokenizer has a template)")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the task's sample selection")
    parser.add_argument("--output-dir", default=None, help="default: runs/eval-<task>-<model>")
    parser.add_argument("--fresh", action="store_true", help="drop the rows already in the output folder")
    parser.add_argument("--no-progress", action="store_true")


def _canvases(args, name: str) -> dict[int, SamplerConfig]:
    """The protocol's sampler per length: the command line's values over the protocol's (d1: over the
    canvas of the run that trained --model)."""
    lengths, block, steps = args.gen_length, args.block_length, args.steps
    trained = run_canvas(args.model) if name == "d1" else None
    if trained and lengths is None and block is None and steps is None:
        canvas, source = trained
        lengths, block, steps = [canvas["gen_length"]], canvas["block_length"], canvas["steps"]
        print(f"canvas from {source}: --gen-length {lengths[0]} --block-length {block} --steps {steps}", file=sys.stderr)
    cache = args.cache or protocols.row(name, args.task).cache
    protocols.check_options(name, args.cache or "none", args.threshold)
    return {L: protocol(L, block, steps, args.threshold, args.batch_size, cache, name, args.task)
            for L in lengths or [None]}


def run(args) -> int:
    from dataclasses import replace

    from ...models import default_device
    from ...registry import get_task, task_spec
    from ...rl.parallel import Parallel, init_process_group, rank_and_world

    names = protocols.parse(args.protocol)
    plans = {name: {cfg.gen_length: cfg for cfg in _canvases(args, name).values()} for name in names}
    init_process_group()
    rank, world = rank_and_world()
    par = Parallel("none", rank, world) if world > 1 else None
    task = get_task(args.task, split=args.split, n=args.n, seed=args.seed)
    samples = list(task.samples)[: args.n] if args.n else list(task.samples)
    adapter = load_trained(args.model, args.trust_remote_code, args.dtype, args.base)
    adapter.model.to(default_device())
    chat = args.chat_template == "on" or (args.chat_template == "auto" and bool(getattr(adapter.tokenizer, "chat_template", None)))
    posed = {n: protocols.protocol_task(n, replace(task, samples=samples), adapter, chat, args.seed) for n in plans}
    for n, cfgs in plans.items():
        check_fits(adapter, [s.prompt for s in posed[n].samples], sorted(cfgs), "--gen-length")
    if task_spec(args.task).tiny:  # the gold is the whole answer: every canvas must hold it and EOS
        gold = gold_lengths(task, adapter.encode)
        for cfgs in plans.values():
            for cfg in cfgs.values():
                check(cfg, "--", gold, args.task, eos=False)
    out = Path(args.output_dir) if args.output_dir else default_output(args.task, args.model)
    if rank == 0:
        claim(out, model_identity(args.model, args.base, args.dtype, chat), fresh=args.fresh)
    if par is not None:
        par.barrier()
    table = []
    for name, cfgs in plans.items():
        table += evaluate_lengths(adapter, task, samples, cfgs, out, chat, progress=not args.no_progress, name=name,
                                  par=par, seed=args.seed, posed=posed[name])
    rules = {n: {L: protocols.suppress(n, args.task, adapter, c.cache) for L, c in cfgs.items()} for n, cfgs in plans.items()}
    record = {"protocols": {n: {L: json.loads(decoding(c, rules[n][L])) for L, c in cfgs.items()} for n, cfgs in plans.items()},
              "task": args.task, "split": args.split, "n": len(samples), "model": args.model,
              "device": str(adapter.device), "dtype": args.dtype, "batch_size": args.batch_size, "processes": world,
              "cache": {n: sorted({c.cache for c in cfgs.values()}) for n, cfgs in plans.items()}, "threshold": args.threshold, "seed": args.seed, "chat_template": chat,
              "versions": versions()}
    if rank == 0:
        write_summary(out, table, record)
        print(f"{args.task} ({args.split}, {len(samples)} samples), model {args.model}, chat template {'on' if chat else 'off'}")
        print(markdown(table))
        print(describe(record))
        print(f"wrote {out / 'samples.jsonl'}, {out / 'summary.md'}, {out / 'summary.csv'}, {out / 'record.json'}")
    return 0
