"""`daca-bench eval`: a checkpoint on a task at one or more generation lengths, d1's protocol.

    daca-bench eval --model GSAI-ML/LLaDA-8B-Instruct --trust-remote-code --dtype bfloat16 \\
        --task gsm8k --gen-length 128 256 512 --output-dir runs/eval-llada-gsm8k

d1's protocol by default: greedy decoding, low-confidence remasking, block 32 (or the whole
canvas when shorter), steps = length / 2, zero-shot prompts wrapped as one user message with
the tokenizer's chat template where it has one. `--threshold 0.9` decodes in parallel
instead (every masked position above the confidence threshold per step). The model is
`tiny`, a save_pretrained folder, a hub id or a LoRA adapter folder (merged into its base).
Writes OUTPUT/samples.jsonl (one row per length and sample: id, gen_length, decoding, completion,
reward, status), skipping rows of the same decoding already there (resumable), OUTPUT/model.json
(the model's identity: path or hub id, a fingerprint of its weights, dtype, chat template; a
folder holding another model's rows is refused, `--fresh` starts over) and OUTPUT/summary.{md,csv}.
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
from ...models import load_checkpoint, run_canvas, task_prompts
from ...rl.evaluate import score
from ...rl.sampler import sample

COLUMNS = ["gen_length", "n", "accuracy", "acc_d1", "infra_failures", "block_length", "steps", "decoding"]


def protocol(gen_length: int, block_length: int = 32, steps: int | None = None, threshold: float | None = None,
             batch_size: int = 32, cache: str = "none") -> SamplerConfig:
    """d1's evaluation sampler at one length: greedy, block min(b, L), steps L / 2 unless given."""
    b = min(block_length, gen_length)
    cfg = SamplerConfig(gen_length=gen_length, block_length=b, steps=steps or max(gen_length // 2, gen_length // b),
                        temperature=0.0, threshold=threshold, batch_size=batch_size, cache=cache)
    check(cfg, "--")
    return cfg


def decoding(cfg: SamplerConfig) -> str:
    """The settings a cached row was decoded with (batch size aside, which changes no completion)."""
    keys = ("gen_length", "block_length", "steps", "temperature", "remasking", "threshold") + \
        (("cache",) if cfg.cache != "none" else ())  # uncached rows keep the key they were stored under
    return json.dumps({k: getattr(cfg, k) for k in keys}, sort_keys=True)


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


def read_done(path: Path) -> dict[tuple[int, str, str], dict]:
    """Rows already written, keyed by (gen_length, decoding, sample id); a torn line (an interrupted write)
    is dropped. A row of other decoding settings never stands in for this run's."""
    done, torn = {}, False
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                torn = True
                continue
            done[(int(row["gen_length"]), str(row.get("decoding", "")), str(row["id"]))] = row
    if torn:
        path.write_text("".join(json.dumps(r) + "\n" for r in done.values()))
    return done


def summarise(rows: list[dict], cfgs: dict[int, SamplerConfig]) -> list[dict]:
    out = []
    for length, cfg in cfgs.items():
        mine = [r for r in rows if r["gen_length"] == length]
        scored = [r["reward"] for r in mine if r["reward"] is not None]
        d1 = [r["d1"] for r in mine if r["reward"] is not None and r.get("d1")]  # d1's verdict: [correct, total]
        d1_total = sum(t for _, t in d1)
        out.append({"gen_length": length, "n": len(mine),
                    "accuracy": round(sum(scored) / len(scored), 4) if scored else math.nan,
                    "acc_d1": round(sum(c for c, _ in d1) / d1_total, 4) if d1_total else "",
                    "infra_failures": len(mine) - len(scored), "block_length": cfg.block_length, "steps": cfg.steps,
                    "decoding": (f"threshold {cfg.threshold}" if cfg.threshold is not None else "greedy")
                    + (f", cache {cfg.cache}" if cfg.cache != "none" else "")})
    return out


def markdown(table: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in table]
    return "\n".join(lines)


def evaluate_lengths(adapter, task, samples, cfgs: dict[int, SamplerConfig], out: Path, chat: bool,
                     progress: bool = True) -> list[dict]:
    """Sample and score every (length, sample) not yet in OUTPUT/samples.jsonl; return the summary table."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "samples.jsonl"
    done = read_done(path)
    keys = {L: decoding(cfg) for L, cfg in cfgs.items()}
    todo = [(L, s) for L in cfgs for s in samples if (L, keys[L], str(s.id)) not in done]
    prompts = dict(zip([s.id for s in samples], task_prompts(adapter, samples, chat)))  # + d1's prefill
    adapter.model.eval()
    bar = tqdm(total=len(todo), desc=f"eval {task.name}", disable=not progress)
    with open(path, "a") as sink:
        for L, cfg in cfgs.items():
            mine = [s for length, s in todo if length == L]
            for i in range(0, len(mine), cfg.batch_size):
                part = mine[i:i + cfg.batch_size]
                texts = sample(adapter, [prompts[s.id] for s in part], cfg, seed=0, record=False).texts
                for s, text, r in zip(part, texts, score(task, part, texts)["rewards"]):
                    row = {"id": s.id, "gen_length": L, "decoding": keys[L], "completion": text,
                           "reward": r.as_json_value(), "status": r.status,
                           **({"d1": r.details["d1"]} if "d1" in r.details else {})}
                    sink.write(json.dumps(row) + "\n")
                    done[(L, keys[L], str(s.id))] = row
                sink.flush()
                bar.update(len(part))
    bar.close()
    ids = {str(s.id) for s in samples}
    table = summarise([r for (L, key, sid), r in done.items() if sid in ids and L in cfgs and key == keys[L]], cfgs)
    (out / "summary.md").write_text(markdown(table) + "\n")
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(table)
    return table


# ---- CLI: `daca-bench eval` ---------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("--model", default="tiny", help="tiny | a save_pretrained folder | a hub id | a LoRA adapter folder")
    parser.add_argument("--base", default="", help="base model of a LoRA adapter folder that does not name one")
    parser.add_argument("--task", required=True, help="a registered task (see `daca-bench tasks`)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=None, help="samples (default: the whole split)")
    parser.add_argument("--gen-length", type=int, nargs="+", default=None,
                        help="one or more canvas lengths (default: the canvas of the run that trained --model, else 256)")
    parser.add_argument("--block-length", type=int, default=None, help="default: that run's, else 32")
    parser.add_argument("--steps", type=int, default=None, help="denoising steps (default: that run's, else length / 2)")
    parser.add_argument("--threshold", type=float, default=None, help="parallel decoding above this confidence")
    parser.add_argument("--cache", default="none", choices=("none", "prefix", "dual"),
                        help="KV cache within a block (sampler.cache; docs/method.md section 3.1)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--chat-template", choices=("auto", "on", "off"), default="auto",
                        help="wrap prompts as a user message (auto: when the tokenizer has a template)")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the task's sample selection")
    parser.add_argument("--output-dir", default=None, help="default: runs/eval-<task>-<model>")
    parser.add_argument("--fresh", action="store_true", help="drop the rows already in the output folder")
    parser.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    from ...registry import get_task, task_spec

    trained = run_canvas(args.model)
    lengths, block, steps = args.gen_length, args.block_length, args.steps
    if trained and lengths is None and block is None and steps is None:
        canvas, source = trained
        lengths, block, steps = [canvas["gen_length"]], canvas["block_length"], canvas["steps"]
        print(f"canvas from {source}: --gen-length {lengths[0]} --block-length {block} --steps {steps}", file=sys.stderr)
    cfgs = {L: protocol(L, block or 32, steps, args.threshold, args.batch_size, args.cache) for L in lengths or [256]}
    task = get_task(args.task, split=args.split, n=args.n, seed=args.seed)
    samples = list(task.samples)[: args.n] if args.n else list(task.samples)
    adapter = load_checkpoint(args.model, args.trust_remote_code, args.dtype, args.base)
    check_fits(adapter, [s.prompt for s in samples], list(cfgs), "--gen-length")
    if task_spec(args.task).tiny:  # the gold is the whole answer: every canvas must hold it and EOS
        gold = gold_lengths(task, adapter.encode)
        for cfg in cfgs.values():
            check(cfg, "--", gold, args.task, eos=False)
    chat = args.chat_template == "on" or (args.chat_template == "auto" and bool(getattr(adapter.tokenizer, "chat_template", None)))
    out = Path(args.output_dir) if args.output_dir else default_output(args.task, args.model)
    claim(out, model_identity(args.model, args.base, args.dtype, chat), fresh=args.fresh)
    table = evaluate_lengths(adapter, task, samples, cfgs, out, chat, progress=not args.no_progress)
    print(f"{args.task} ({args.split}, {len(samples)} samples), model {args.model}, chat template {'on' if chat else 'off'}")
    print(markdown(table))
    print(f"wrote {out / 'samples.jsonl'}, {out / 'summary.md'}, {out / 'summary.csv'}")
    return 0
