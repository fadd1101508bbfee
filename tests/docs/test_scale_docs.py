"""Scaling out, as documented: the launch commands of docs/trainer.md ("Scaling out"),
docs/paper-presets.md ("Launching the presets at every scale") and BENCHMARKS.md ("Scaling out
(FSDP2): GPU figures") name config files that exist and keys that load; the full fine-tuning
presets differ from their LoRA presets only where they say; the GPU benchmark refuses a machine
without CUDA in one line (exit 2) and runs its code at toy widths on the CPU; the shell scripts
parse (`bash -n`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

from daca_bench.config import RLConfig, load_config, to_dict

from repo_paths import ROOT

SECTIONS = [
    ("docs/trainer.md", "## Scaling out"),
    ("docs/paper-presets.md", "## Launching the presets at every scale"),
    ("BENCHMARKS.md", "## Scaling out (FSDP2): GPU figures"),
]
LAUNCHERS = ("daca-bench ", "torchrun ", "accelerate launch ", "sbatch ")
FULL = {
    "configs/paper/llada_gsm8k_full.yaml": "configs/paper/llada_gsm8k.yaml",
    "configs/paper/dream_gsm8k_full.yaml": "configs/paper/dream_gsm8k.yaml",
}


def section(page: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same level."""
    text = (ROOT / page).read_text(encoding="utf-8")
    start = text.index(heading + "\n")
    level = heading.split()[0] + " "
    end = text.find("\n" + level, start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def commands(text: str) -> list[str]:
    """Launch commands of a Markdown text: the lines of its fenced blocks (continuations joined,
    comments dropped, a `for` loop's body included) and its inline code spans."""
    found, prose, inside, cur = [], [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            prose.append(line)
            continue
        body = re.sub(r"(^|\s)#.*$", "", line).strip()
        if body.endswith("\\"):
            cur += body[:-1] + " "
            continue
        cur += body
        if cur.strip():
            found.append(re.sub(r"\s+", " ", cur.strip()))
        cur = ""
    found += re.findall(r"`([^`\n]+)`", "\n".join(prose))
    return [c for c in found if c.startswith(LAUNCHERS)]


def train_args(command: str) -> list[str] | None:
    """The `daca-bench` arguments a launch command runs (None: it runs no daca-bench command)."""
    words = shlex.split(command.replace("$", "DOLLAR"))
    if words[0] == "sbatch":
        at = words.index("scripts/slurm/train.sbatch")
        config, _out, *over = words[at + 1 :]
        return ["train", "--config", config, *over]
    if words[0] == "daca-bench":
        return words[1:]
    module = words[words.index("-m") + 1]
    rest = words[words.index("-m") + 2 :]
    if module == "daca_bench":
        return rest
    if module == "benchmarks.gpu.profile_collectives":
        return rest[rest.index("--") + 1 :]
    raise AssertionError(f"unknown module {module!r} in {command!r}")


def check_train(args: list[str]) -> str:
    """Load (and validate) the config and overrides a `train` command names; returns the config."""
    from daca_bench.train.trainer import validate

    config, over, i = None, [], 1
    while i < len(args):
        word = args[i]
        if word == "--config":
            config, i = args[i + 1], i + 2
            continue
        if word in ("--output-dir",):
            i += 2
            continue
        if word.startswith("--"):
            assert word in ("--no-progress", "--fresh", "--resume"), f"unexpected option {word}"
        else:
            assert "=" in word, f"not a KEY=VALUE override: {word}"
            over.append(word)
        i += 1
    assert config is not None, f"no --config in {args}"
    assert (ROOT / config).is_file(), f"no such config: {config}"
    validate(load_config(ROOT / config, over, RLConfig))
    return config


def documented() -> list[tuple[str, str]]:
    return [(page, c) for page, heading in SECTIONS for c in commands(section(page, heading))]


def test_the_parser_reads_blocks_loops_continuations_and_inline_code():
    text = (
        "Run `daca-bench train --config configs/tiny.yaml sml.k=4` or\n\n```bash\nfor N in 1 2; do\n"
        "  torchrun --nproc_per_node $N -m daca_bench train --config configs/tiny.yaml \\\n"
        "      dps.enabled=true   # +DPS\ndone\n```\n"
    )
    got = commands(text)
    assert got == [
        "torchrun --nproc_per_node $N -m daca_bench train --config configs/tiny.yaml dps.enabled=true",
        "daca-bench train --config configs/tiny.yaml sml.k=4",
    ]
    assert train_args(got[0]) == ["train", "--config", "configs/tiny.yaml", "dps.enabled=true"]


def test_every_documented_launch_names_configs_and_keys_that_load():
    found = documented()
    kinds = {c.split()[0] for page, c in found if page == "docs/trainer.md"}
    assert kinds == {"daca-bench", "torchrun", "accelerate", "sbatch"}, kinds
    configs = set()
    for page, command in found:
        args = train_args(command)
        if args[0] == "train":
            configs.add(check_train(args))
        elif args[0] == "reproduce":
            from daca_bench.experiments.grid.presets import PRESETS

            assert args[args.index("--preset") + 1] in PRESETS, (page, command)
    assert set(FULL) <= configs and "configs/paper/llada_gsm8k.yaml" in configs
    assert len(found) >= 15


def test_an_unknown_key_or_config_in_a_command_is_caught():
    from daca_bench.config import ConfigError

    with pytest.raises(ConfigError):
        check_train(
            train_args("torchrun --nproc_per_node 8 -m daca_bench train --config configs/tiny.yaml train.paralel=shard")
        )
    with pytest.raises(AssertionError, match="no such config"):
        check_train(train_args("sbatch --nodes 2 scripts/slurm/train.sbatch configs/paper/nope.yaml /shared/x"))


@pytest.mark.parametrize("full,lora", list(FULL.items()))
def test_full_presets_are_their_lora_presets_with_lora_off_and_shard(full, lora):
    def flat(d, prefix=""):
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
        return out

    a, b = (flat(to_dict(load_config(ROOT / p, [], RLConfig))) for p in (full, lora))
    differ = {k for k in a if a[k] != b[k]}
    assert differ == {"train.lora", "train.parallel", "output_dir"}, differ
    assert a["train.lora"] is False and a["train.parallel"] == "shard" and a["output_dir"].endswith("-full")
    header = (ROOT / full).read_text().split("\nmodel:")[0]
    assert "DARE" in header and "several GPUs" in header and "Memory per GPU" in header


def _no_cuda_env() -> dict:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}


def test_gpu_parallel_refuses_a_machine_without_cuda_in_one_line(tmp_path):
    out = tmp_path / "gpu_parallel.json"
    tick = time.perf_counter()
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu/gpu_parallel.sh"), "--json", str(out)],
        env=_no_cuda_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0], done.stderr
    assert done.stdout == "" and not out.exists()
    assert time.perf_counter() - tick < 60


def test_the_shell_scripts_parse():
    for script in ("benchmarks/gpu/gpu_parallel.sh", "scripts/slurm/train.sbatch"):
        done = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
        assert done.returncode == 0, (script, done.stderr)
    sbatch = (ROOT / "scripts/slurm/train.sbatch").read_text()
    for needed in (
        "#SBATCH --signal=TERM@120",
        "#SBATCH --requeue",
        "--rdzv-backend c10d",
        'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1',
        "srun ",
    ):
        assert needed in sbatch, needed


@pytest.mark.slow
def test_gpu_parallel_runs_its_code_at_toy_widths_on_the_cpu(tmp_path):
    """The benchmark's code path (build as train() does, none / replicate / shard, FLOPs, weight
    movement) at toy widths: what the GPU run will execute, minus the sizes."""
    out = tmp_path / "toy.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu.gpu_parallel", "--toy", "--mu", "2", "--json", str(out)],
        env={**_no_cuda_env(), "OMP_NUM_THREADS": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [report[k]["mode"] for k in ("g1_none", "g1_replicate", "g3_shard")] == ["none", "replicate", "shard"]
    assert report["g3_shard"]["weights"]["moved_frac"] > 0.9  # fp32 master weights move at lr 3e-6
    for key in ("g1_none", "g1_replicate", "g3_shard"):
        r = report[key]
        assert r["forward_passes"]["rollout"] > 0 and r["flops"]["update_tflop"] > 0
        assert r["flops"]["update_factor"] == (3 if key == "g3_shard" else 2)
    assert "time_overhead" in report["g1"] and "forward FLOPs = 2 * N * T" in report["flop_formula"]


@pytest.mark.slow
def test_profile_collectives_writes_a_rank_report(tmp_path):
    """One process (no collectives to time): the profiled step's report is written and training is unchanged."""
    prof = tmp_path / "prof"
    args = [
        "--profile-step",
        "2",
        "--trace-dir",
        str(prof),
        "--",
        "train",
        "--no-progress",
        "train.steps=2",
        "train.prompts_per_step=2",
        "train.num_generations=2",
        "train.n_eval=4",
        "train.threads=1",
        "rollout.gen_length=8",
        "rollout.block_length=4",
        "rollout.steps=4",
        "eval.block_length=4",
        "eval.steps=4",
        "--output-dir",
        str(tmp_path / "run"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu.profile_collectives", *args],
        env={**_no_cuda_env(), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((prof / "rank0.json").read_text())
    assert (
        report["step"] == 2
        and report["world"] == 1
        and set(report["collectives"]) == {"all_gather", "reduce_scatter", "all_reduce", "broadcast"}
    )
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 2


ROLLOUT_COPY = """
import torch
from daca_bench.engine.parallel import Parallel
from daca_bench.testing.paper import paper_model

model = paper_model("llada", compact=True, d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, mlp_hidden_size=64)
model.requires_grad_(False)  # LoRA's frozen base ...
trainable = [p for n, p in model.named_parameters() if "ff_out" in n or "att_proj" in n]
for p in trainable:  # ... and a few trainable weights standing in for the adapters
    p.requires_grad_(True)
par = Parallel("replicate", 0, 1)
par.wrap(model)
local = lambda p: p.to_local() if hasattr(p, "to_local") else p
own = {n: local(p).data_ptr() for n, p in model.named_parameters() if not p.requires_grad}
with par.rollout(model):
    shared = [n for n, p in model.named_parameters() if n in own and p.data_ptr() == own[n]]
print(len(shared), len(own), len(trainable))
"""


def test_the_frozen_base_is_held_once_under_replicate_as_the_memory_table_says():
    """docs/trainer.md, "Memory per GPU": under replicate LoRA's frozen base stays outside FSDP2, so the
    rollout (par.rollout(), every unit unsharded) decodes on the GPU's one copy of it, no second one.
    Managed by FSDP2 it would be copied into buffers of FSDP2's own (0 of the weights shared storage)."""
    done = subprocess.run(
        [sys.executable, "-c", ROLLOUT_COPY],
        env={**_no_cuda_env(), "OMP_NUM_THREADS": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shared, frozen, trainable = map(int, done.stdout.split())
    assert trainable > 0 and frozen > 0 and shared == frozen, "frozen weights copied in the rollout: update the table"


def test_the_memory_table_is_its_formula_term_by_term():
    """docs/trainer.md's memory table is memory_table()'s rows, each the sum of memory_terms (every term: the root
    gather, AdamW's step temporary, the sharded start-up among them), recomputed here from the parameter counts."""
    from daca_bench.engine.memory import LLADA_8B, memory_bound, memory_table, memory_terms

    text = (ROOT / "docs" / "trainer.md").read_text()
    for line in memory_table():
        assert line in text, line
    P, R, root = LLADA_8B["params"], LLADA_8B["lora"], LLADA_8B["root"]
    assert P == 8_015_581_184 and root == 1_035_993_088 and R == 32 * (3 * 128 * 8_192 + 128 * 16_384)
    for n in (1, 2, 4, 8):
        full = memory_terms("full-shard", n)
        assert {"root gather", "AdamW step temporary", "startup", "rollout copy", "state", "reference"} <= set(full)
        want = (16 + 2 + 4) * P / n / 1e9 + 2 * P / 1e9 + 2 * root / 1e9 + LLADA_8B["activations"]
        assert memory_bound(full) == pytest.approx(max(want, 4 * P / n / 1e9))  # the sharded start-up: its shards
        assert full["startup"] == pytest.approx(4 * P / n / 1e9)
        off = memory_terms("full-shard-offload", n)
        assert memory_bound(off) == pytest.approx(2 * P / 1e9 + 2 * root / 1e9 + LLADA_8B["activations"])
        assert sum(v for k, v in off.items() if k.startswith("host")) == pytest.approx(22 * P / n / 1e9)
    lora = memory_terms("lora-replicate", 1)
    assert memory_bound(lora) == pytest.approx((2 * P + (16 + 4 + 2) * R) / 1e9 + LLADA_8B["activations"])
    assert "| full, `shard` | 210.1 GB, no | 122.0 GB, no | 77.9 GB, fits | 55.8 GB, fits |" in text


def test_the_sdar_memory_table_is_its_formula():
    """docs/paper-presets.md's SDAR-8B table is memory_table(m=SDAR_8B), from SDAR-8B-Chat's published shape."""
    from daca_bench.engine.memory import SDAR_8B, memory_table

    text = (ROOT / "docs" / "paper-presets.md").read_text()
    for line in memory_table(m=SDAR_8B):
        assert line in text, line
    layer = 4_096 * (2 * 4_096 + 2 * 1_024) + 3 * 4_096 * 12_288 + 2 * 128 + 2 * 4_096  # q, k, v, o; MLP; norms
    assert SDAR_8B["params"] == 36 * layer + 2 * 151_936 * 4_096 + 4_096 == 8_190_735_360
