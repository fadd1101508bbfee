"""`daca-bench eval`: d1's protocol per length, the table, resuming, LoRA adapter folders."""

import json

import pytest
import torch

from daca_bench.cli import main
from daca_bench.eval.runner import protocol


def test_protocol_is_d1s_greedy_block_32_half_steps():
    cfg = protocol(256)
    assert (cfg.block_length, cfg.steps, cfg.temperature, cfg.threshold) == (32, 128, 0.0, None)
    assert (protocol(16).block_length, protocol(16).steps) == (16, 8)
    assert protocol(128, threshold=0.9).threshold == 0.9
    with pytest.raises(ValueError, match="multiple"):
        protocol(48)


def test_eval_prints_a_table_and_resumes_without_redoing_rows(tmp_path, capsys):
    args = [
        "eval",
        "--model",
        "tiny",
        "--task",
        "sudoku_tiny",
        "--gen-length",
        "16",
        "32",
        "--n",
        "3",
        "--output-dir",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| gen_length |" in out and "| 16 | 3 |" in out and "| 32 | 3 |" in out
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 6 and {"id", "gen_length", "completion", "reward", "status"} <= set(json.loads(lines[0]))
    (tmp_path / "samples.jsonl").write_text("\n".join(lines[:4]) + '\n{"torn')  # interrupted mid-write
    assert main(args) == 0
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines() if x.endswith("}")]
    assert len(rows) == 6 and len({(r["gen_length"], r["id"]) for r in rows}) == 6
    assert rows[4:] == [json.loads(x) for x in lines[4:]]  # greedy: the redone rows are the same
    assert (tmp_path / "summary.csv").read_text().startswith("protocol,gen_length,n,accuracy")


@pytest.mark.parametrize("remote", [False, True], ids=["native", "remote-code"])
def test_eval_of_a_lora_adapter_folder_on_llada(remote, tmp_path, capsys):
    from peft import LoraConfig, get_peft_model

    from daca_bench.models import load_checkpoint, load_pretrained
    from daca_bench.testing import write_paper_folder, write_remote_folder

    base_dir = (write_remote_folder if remote else write_paper_folder)("llada", tmp_path / "base", compact=True)
    base = load_pretrained(str(base_dir), trust_remote_code=remote)
    peft = get_peft_model(base.model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    for n, p in peft.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.5)
    peft.save_pretrained(tmp_path / "lora")
    merged = load_checkpoint(str(tmp_path / "lora"), trust_remote_code=remote)
    assert type(merged.model).__module__.startswith("transformers_modules") is remote
    ids = torch.tensor([[10, 11, 1, 1]])
    with torch.no_grad():
        assert torch.allclose(merged.logits(ids), peft(input_ids=ids).logits, atol=1e-5)
    assert (
        main(
            [
                "eval",
                "--model",
                str(tmp_path / "lora"),
                *["--trust-remote-code"] * remote,
                "--task",
                "arithmetic",
                "--gen-length",
                "8",
                "--n",
                "2",
                "--output-dir",
                str(tmp_path / "out"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "| 8 | 2 |" in capsys.readouterr().out


def test_chat_prompts_wrap_a_user_message(tiny):
    from daca_bench.eval.prompts import chat_prompts

    with pytest.raises(ValueError, match="chat template"):
        chat_prompts(tiny, ["hi"])
    tiny.tokenizer.chat_template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}>"
    try:
        assert chat_prompts(tiny, ["2+2="]) == ["<user>2+2=>"]
    finally:
        tiny.tokenizer.chat_template = None


def test_decode_and_template_axes_write_a_grid_with_paired_intervals(tmp_path, capsys):
    """issue 59: one checkpoint under several decodings and templates in one run; the grid carries
    decoding, template and temperature, each accuracy with a bootstrap interval and a paired difference."""
    from daca_bench.eval import axes

    out = tmp_path / "axes"
    assert (
        main(
            [
                "eval",
                "--task",
                "sudoku_tiny",
                "--gen-length",
                "18",
                "--n",
                "4",
                "--decode",
                "protocol,reference",
                "--templates",
                "plain",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    grid = json.loads((out / "grid.json").read_text())
    assert [(r["decode"], r["template"], r["steps"]) for r in grid] == [
        ("protocol", "plain", 9),
        ("reference", "plain", 18),
    ]
    assert all(r["lo"] <= r["accuracy"] <= r["hi"] and r["temperature"] == 0.0 and r["n"] == 4 for r in grid)
    assert grid[0]["diff"] == 0 and (out / "plain" / "reference" / "d1" / "18" / "record.json").exists()
    assert "| decode |" in (out / "grid.md").read_text()
    summary = (out / "plain" / "reference" / "d1" / "18" / "summary.csv").read_text().splitlines()[1].split(",")
    assert float(summary[3]) == grid[1]["accuracy"]  # the grid's accuracy is the cell's summary's
    assert main(["table", str(out)]) == 0 and main(["plot", str(out)]) == 0  # the grid as table and figure
    assert "| plain | reference | 0.0 | 18 |" in (out / "decodes.md").read_text() and (out / "decodes.png").exists()
    assert axes.bootstrap([1, 0, 1, 1], [1, 0, 1, 1]) == (0.0, 0.0)
    lo, hi = axes.bootstrap([1.0] * 10 + [0.0] * 10)
    assert lo < 0.5 < hi
    with pytest.raises(Exception, match="unknown beam"):
        axes.parse("protocol,beam", axes.DECODES, "--decode")
    with pytest.raises(Exception, match="names no run"):
        axes.overrides("rollout", "tiny", 18)


def test_sampled_eval_rows_do_not_depend_on_the_batch_or_the_rank(tiny, tmp_path):
    """issue 59: at temperature 1 each sample draws its noise from (seed, its id), so batch 1 and batch 4
    give the same rows, and a rank's share (samples 1::2) the rows of one process; greedy is untouched."""
    from dataclasses import replace

    from daca_bench.config import SamplerConfig
    from daca_bench.eval.evaluate import evaluate
    from daca_bench.eval.runner import run_eval
    from daca_bench.registry import get_task

    task = get_task("sudoku_tiny", split="test", n=4)
    cfg = SamplerConfig(gen_length=16, block_length=16, steps=8, temperature=1.0)
    one = evaluate(tiny, task, replace(cfg, batch_size=1))["completions"]
    four = evaluate(tiny, task, replace(cfg, batch_size=4))["completions"]
    assert one == four
    share = replace(task, samples=list(task.samples)[1::2])
    assert evaluate(tiny, share, replace(cfg, batch_size=4))["completions"] == one[1::2]
    assert evaluate(tiny, task, replace(cfg, batch_size=4), seed=1)["completions"] != one  # the seed is in effect
    greedy = evaluate(tiny, task, replace(cfg, temperature=0.0))["completions"]
    assert greedy != one and evaluate(tiny, task, replace(cfg, temperature=0.0), seed=5)["completions"] == greedy

    def rows(batch):  # the command's path: samples.jsonl rows at temperature 1
        out = tmp_path / f"b{batch}"
        run_eval(
            "tiny",
            "sudoku_tiny",
            ["d1"],
            n=4,
            gen_lengths=[16],
            batch_size=batch,
            temperature=1.0,
            output_dir=str(out),
            progress=False,
        )
        return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]

    b1, b4 = rows(1), rows(4)
    assert [(r["id"], r["completion"]) for r in b1] == [(r["id"], r["completion"]) for r in b4]
    assert json.loads(b1[0]["decoding"])["seed"] == 0  # a sampled row's key names its seed


def test_a_chat_template_the_tokenizer_lacks_is_refused_and_auto_records_what_it_used(tiny, tmp_path, capsys):
    """issue 59: `on` (and --templates chat) without a chat template is one line, before anything is decoded;
    `auto` records and prints the flag the prompts were built with; protocol_task never falls back silently."""
    from daca_bench.errors import ConfigError
    from daca_bench.eval.prompts import protocol_task
    from daca_bench.registry import get_task

    base = ["eval", "--task", "sudoku_tiny", "--gen-length", "16", "--n", "2", "--no-progress"]
    assert main([*base, "--chat-template", "on", "--output-dir", str(tmp_path / "on")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tokenizer has no chat template" in err[0] and not (tmp_path / "on").exists()
    axes = tmp_path / "axes"
    assert main([*base, "--decode", "protocol", "--templates", "plain,chat", "--output-dir", str(axes)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--templates chat" in err[0] and not (axes / "plain").exists()  # chat cells first
    assert main([*base, "--output-dir", str(tmp_path / "auto")]) == 0
    printed = capsys.readouterr().out
    record = json.loads((tmp_path / "auto" / "record.json").read_text())
    assert (record["chat_template"], record["chat_template_requested"]) == (False, "auto")
    assert record["ids"]["d1"] == [json.loads(x)["id"] for x in (tmp_path / "auto" / "samples.jsonl").open()]
    said = "chat template off (auto: the tokenizer has none)"
    assert said in printed and said in (tmp_path / "auto" / "summary.md").read_text()
    with pytest.raises(ConfigError, match="no chat template"):
        protocol_task("d1", get_task("sudoku_tiny", split="test", n=1), tiny, chat=True)


def test_the_rollout_decode_reads_an_rl_runs_rollout_section_and_an_sft_runs_sampler(tmp_path):
    """`--decode rollout` on an RL run's final/ reads its config.json's `rollout` (RLConfig), on an SFT run's its
    `sampler`; a folder with neither is refused in one line."""
    import json

    from daca_bench.errors import ConfigError
    from daca_bench.eval.axes import rollout_sampler

    rl, sft, bare = (tmp_path / n for n in ("rl", "sft", "bare"))
    for folder in (rl, sft, bare):
        (folder / "final").mkdir(parents=True)
    (rl / "config.json").write_text(json.dumps({"rollout": {"gen_length": 18, "temperature": 0.9}}))
    (sft / "config.json").write_text(json.dumps({"sampler": {"gen_length": 32, "temperature": 0.0}}))
    (bare / "config.json").write_text(json.dumps({"train": {}}))
    assert rollout_sampler(str(rl / "final")) == {"gen_length": 18, "temperature": 0.9}
    assert rollout_sampler(str(sft / "final"))["gen_length"] == 32
    with pytest.raises(ConfigError, match="rollout or sampler section"):
        rollout_sampler(str(bare / "final"))
