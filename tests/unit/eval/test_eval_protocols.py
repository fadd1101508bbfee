"""`daca-bench eval --protocol d1|llada|dare` (issue 46): the protocol tables hold the sources' values, the
sampler's LLaDA EOS rules equal a hand-written reference of LLaDA's loop, the answer readings, the posed
prompts, every protocol running on the tiny model with its record and step maps, refusals in one line, and
an evaluation split over 2 gloo processes writing the same rows as one process."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from daca_bench.cli import main
from daca_bench.config import ModelConfig, SamplerConfig
from daca_bench.eval import prompts, protocols, readers
from daca_bench.models import load_model
from daca_bench.rl.sampler import Suppress, sample, transfer_schedule

from repo_paths import ROOT


def test_the_tables_hold_the_sources_settings():
    assert protocols.canvas("d1", "gsm8k", 256, None, None) == (256, 32, 128)  # d1 eval/eval.py: block 32, L / 2
    assert protocols.canvas("llada", "gsm8k", None, None, None) == (512, 512, 512)  # LLaDA EVAL.md, examples/
    assert protocols.canvas("llada", "mbpp", None, None, None) == (256, 256, 256)
    assert protocols.canvas("dare", "gsm8k", None, None, None) == (256, 8, 256)  # DARE llada_examples/
    assert protocols.canvas("dare", "math500", None, None, None) == (512, 64, 512)
    assert protocols.canvas("llada", "sudoku_tiny", 18, None, None) == (18, 18, 18)  # generic row, length given
    assert protocols.canvas("d1", "gsm8k", None, None, None) == (128, 32, 64)  # d1 eval/eval.py:186, its default
    assert protocols.canvas("justgrpo", "gsm8k", None, None, None) == (256, 32, 256)  # JustGRPO eval.py:236-238
    assert protocols.ALLOWS["justgrpo"] == set() and protocols.row("justgrpo", "mbpp").decode == "skip_special"
    llada, dare = protocols.PROTOCOLS["llada"], protocols.PROTOCOLS["dare"]
    assert llada["humaneval"].never == ("eos",) and llada["gsm8k"].late == ("eos", "eot")
    assert all(r.cache == "prefix" and not (r.never or r.late) for r in dare.values())  # use_cache drops the flags
    assert (llada["gsm8k"].shots, llada["mbpp"].shots, llada["mbpp"].reply) == (4, 3, "[BEGIN]\n")
    assert protocols.parse("d1, llada,d1") == ["d1", "llada"]
    with pytest.raises(Exception, match="unknown protocol opencompass"):
        protocols.parse("d1,opencompass")


def test_the_readings_of_the_sources_answers():
    assert readers.READERS["last_number"]("so 3 then 42.\nQuestion: 7") == "<answer>\n42\n</answer>"
    assert readers.READERS["last_number"]("none") == ""
    assert (
        readers.READERS["boxed_or_sentence"]("x \\boxed{1} then \\boxed{\\frac{1}{2}}.")
        == "<answer>\n\\frac{1}{2}\n</answer>"
    )
    assert readers.READERS["boxed_or_sentence"]("We try. The answer is 5. Done") == "<answer>\n5\n</answer>"
    assert readers.READERS["first_fence"]("a\n```py\n  x = 1\n```\n```python\ny\n```") == "```python\nx = 1\n\n```"
    assert readers.READERS["first_fence"]("  return 1") == "```python\nreturn 1\n```"
    assert (
        readers.READERS["begin_done"]("[BEGIN]\n 'def f():\r\n  return 1' \n[DONE]")
        == "```python\ndef f():\n  return 1\n```"
    )
    assert readers.READERS["begin_done"]("```python\ndef g(): pass\n```") == "```python\ndef g(): pass\n```"


BEGIN_DONE = [  # (reply, the program OpenCompass's MBPPEvaluator reads; LLaDA's copy, datasets/mbpp.py:309-349)
    (" 'def f():\n  return 1' \n[DONE]", "def f():\n  return 1"),  # the exemplars' format after the prefilled [BEGIN]
    (" 'def f():\n  return 1' \n[DONE] \n\n More\n[BEGIN]\n 'x = 2' \n[DONE]", "x = 2"),  # greedy: a later block wins
    ("[BEGIN]\n 'def f(): return 1' \n[DONE]", "def f(): return 1"),
    ("BEGIN 'def f(): return 1' DONE", "def f(): return 1"),  # brackets optional
    ("[BEGIN]\ndef f(): return 1\n[DONE]", "def f(): return 1"),  # quotes optional
    ("[BEGIN] 'def f(): return 1", "def f(): return 1"),  # cut short: what follows [BEGIN]
    ("Here:\n```python\ndef f(): return 1\n```\nDone.", "def f(): return 1"),  # a fenced block
    ("def f(): return 1\n```", ""),  # a lone closing fence: the "open fence" pattern reads what follows it, nothing
    (" 'def f(): return 1'", "def f(): return 1"),  # no marker at all: the quotes dropped
    ("def my\\_f(): return 1 [DONE] junk", "def my_f(): return 1"),  # \_ unescaped, cut at DONE
]


@pytest.mark.parametrize("reply,program", BEGIN_DONE)
def test_mbpp_reading_follows_opencompass_on_every_format_it_accepts(reply, program):
    assert readers.READERS["begin_done"](reply) == f"```python\n{program}\n```"


@pytest.mark.parametrize(
    "reply,answer",
    [
        ("so \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),  # the exemplar format
        ("\\boxed{{7}}", "7"),  # doubled braces stripped
        ("\\boxed{1} then \\boxed{}. The answer is 3.", "3"),  # an empty last box: the sentence
        ("\\boxed{1} and \\boxed{2", "1and\\boxed{2"),  # the last box never closes: the first sentence, normalised
        ("Thus the final answer is $\\frac{3}{4}$. Yes", "\\frac{3}{4}"),
        ("no number here. nor here", "nonumberhere"),  # neither: the first sentence
        ("x \\fbox{9}.", "x\\fbox{9}"),  # an \\fbox is no \\boxed{ for OpenCompass
    ],
)
def test_math_reading_follows_opencompass_math_postprocess_v2(reply, answer):
    assert readers.READERS["boxed_or_sentence"](reply) == f"<answer>\n{answer}\n</answer>"


def reference_llada(adapter, prompt: str, L: int, never=(), late=()) -> tuple[list[int], list[int]]:
    """LLaDA's generate loop (one block, one token a step, greedy) written out by hand: never-ids' logits
    -inf before the choice; late-ids out of the confidence's softmax (confidence 0); ties to the lowest index."""
    ids = adapter.encode([prompt])[0]
    P = len(ids)
    x = torch.tensor(ids + [adapter.mask_token_id] * L)[None]
    steps = [0] * L
    banned = [adapter.mask_token_id, adapter.pad_token_id]
    for t in range(1, L + 1):
        with torch.no_grad():
            logits = adapter.logits(x, torch.ones_like(x))[0, P:].double()
        logits[:, list(never)] = -torch.inf
        choice = logits.clone()
        choice[:, banned] = -torch.inf
        x0 = choice.argmax(-1)
        conf_logits = logits.clone()
        conf_logits[:, list(late)] = -torch.inf
        conf = torch.softmax(conf_logits, -1).gather(-1, x0[:, None]).squeeze(-1)
        masked = x[0, P:] == adapter.mask_token_id
        conf = torch.where(masked, conf, torch.tensor(-1.0, dtype=torch.float64))
        k = int(torch.nonzero(conf == conf.max())[0])  # the most confident, lowest index on a tie
        x[0, P + k] = x0[k]
        steps[k] = t
    return x[0, P:].tolist(), steps


@pytest.mark.parametrize("bias", [0.5, 0.7, 0.8])
def test_the_eos_rules_equal_a_reference_of_llada_s_loop(bias):
    adapter = load_model(ModelConfig(name="tiny"))
    with torch.no_grad():  # make EOS the choice at some positions, so the rules matter
        adapter.model.cls.predictions.bias[adapter.eos_token_id] = bias
    eos = adapter.eos_token_id
    cfg = SamplerConfig(gen_length=8, block_length=8, steps=8, temperature=0.0, batch_size=1)
    plain = sample(adapter, ["12+5="], cfg).completion_ids[0].tolist()
    assert eos in plain and set(plain) != {eos}
    for rule in (Suppress(late=(eos,)), Suppress(never=(eos,)), Suppress(never=(eos,), late=(eos,))):
        got = sample(adapter, ["12+5="], cfg, rule=rule)
        assert (got.completion_ids[0].tolist(), got.commit_step[0].tolist()) == reference_llada(
            adapter, "12+5=", 8, rule.never, rule.late
        ), rule
    assert eos not in sample(adapter, ["12+5="], cfg, rule=Suppress(never=(eos,))).completion_ids[0].tolist()
    assert transfer_schedule(torch.tensor([8]), 8).tolist() == [[1] * 8]


def write_gsm8k(path: Path, n: int = 6) -> Path:
    rows = [
        {
            "question": f"Tom has {i} apples and buys {i + 2} more. How many apples?",
            "answer": f"He has {i}+{i + 2}=<<{i}+{i + 2}={2 * i + 2}>>{2 * i + 2} apples.\n#### {2 * i + 2}",
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_llada_poses_gsm8k_four_shot_and_mbpp_with_its_exemplars(monkeypatch, tmp_path):
    from daca_bench.loaders import DATA_FILES_ENV
    from daca_bench.registry import get_task

    adapter = load_model(ModelConfig(name="tiny"))
    monkeypatch.setenv(DATA_FILES_ENV, str(write_gsm8k(tmp_path / "gsm.jsonl")))
    task = get_task("gsm8k", split="test", n=1)
    posed = prompts.protocol_task("llada", task, adapter, chat=False)
    text = posed.samples[0].prompt
    assert text.count("Question: ") == 5 and text.endswith("Answer:") and text.count("The answer is ") == 4
    assert "<<" not in text and "####" not in text  # the exemplars' solutions in the source's layout
    adapter.tokenizer.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
    )
    try:
        chat = prompts.protocol_task("llada", task, adapter, chat=True).samples[0].prompt
    finally:
        adapter.tokenizer.chat_template = None
    assert chat.count("<user>Question: ") == 5 and chat.count("<assistant>") == 5
    assert prompts.protocol_task("d1", task, adapter, chat=False).samples[0].prompt == task.samples[0].prompt
    rows = [
        {
            "task_id": i,
            "text": f"Write f{i}.",
            "code": f"def f{i}():\r\n  return {i}",
            "test_list": [f"assert f{i}() == {i}"],
        }
        for i in range(1, 12)
    ]
    mbpp = tmp_path / "mbpp.jsonl"
    mbpp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv(DATA_FILES_ENV, str(mbpp))
    task = get_task("mbpp", split="test", n=1)
    text = prompts.protocol_task("llada", task, adapter, chat=False).samples[0].prompt
    assert [f"Write f{i}." in text for i in (2, 3, 4, 5)] == [True, True, True, False]
    assert text.endswith("assert f1() == 1  \n[BEGIN]\n") and "[BEGIN]\n 'def f2():\n  return 2' \n[DONE]" in text
    scored = prompts.protocol_task("llada", task, adapter, chat=False)
    assert (
        readers.READERS["begin_done"]("[BEGIN]\n 'def f1():\n  return 1' \n[DONE]")
        == "```python\ndef f1():\n  return 1\n```"
    )
    assert scored.verify is not task.verify
    # the reply after the prompt's [BEGIN], in the exemplars' own format, is a correct program (issue 59)
    assert scored.verify(scored.samples[0], " 'def f1():\n  return 1' \n[DONE] \n\n ").status == "correct"
    assert scored.verify(scored.samples[0], " 'def f1():\n  return 2' \n[DONE]").status != "correct"


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """The tiny model with room for few-shot prompts (1024 positions), saved as a model folder."""
    folder = tmp_path_factory.mktemp("tiny1k")
    load_model(ModelConfig(name="tiny", max_positions=1024)).save(folder)
    return folder


def test_every_protocol_runs_on_tiny_and_records_what_explains_a_difference(tmp_path, tiny_folder, capsys):
    data = write_gsm8k(tmp_path / "gsm.jsonl")
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_folder),
                "--task",
                "gsm8k",
                "--data-file",
                str(data),
                "--protocol",
                "d1,llada,dare",
                "--gen-length",
                "16",
                "--n",
                "2",
                "--batch-size",
                "2",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    for line in ("| d1 | 16 | 2 |", "| llada | 16 | 2 |", "| dare | 16 | 2 |"):
        assert line in printed
    assert "device cpu, dtype float32, batch 2 x 1 process(es), cache d1 none, llada none, dare prefix" in printed
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["protocol"] for r in rows) == ["d1", "d1", "dare", "dare", "llada", "llada"]
    steps = {"d1": 8, "llada": 16, "dare": 16}
    for r in rows:  # every canvas token committed once, at a 1-based step of its protocol's sampler
        assert len(r["step_maps"]) == 16 and 1 <= min(r["step_maps"]) and max(r["step_maps"]) <= steps[r["protocol"]]
    llada = next(r for r in rows if r["protocol"] == "llada")
    assert json.loads(llada["decoding"])["late"] == [2] and "read" in llada
    record = json.loads((out / "record.json").read_text())
    assert {"device", "dtype", "batch_size", "cache", "threshold", "seed", "processes", "versions"} <= set(record)
    assert record["versions"]["torch"] == torch.__version__ and record["protocols"]["dare"]["16"]["block_length"] == 8
    assert (out / "summary.csv").read_text().splitlines()[0].startswith("protocol,gen_length")
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_folder),
                "--task",
                "gsm8k",
                "--data-file",
                str(data),
                "--protocol",
                "llada",
                "--gen-length",
                "16",
                "--n",
                "2",
                "--output-dir",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert len((out / "samples.jsonl").read_text().splitlines()) == 6  # resumed: nothing decoded again


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--protocol", "llada", "--cache", "prefix"], "--protocol llada: its source decodes without a KV cache"),
        (["--protocol", "llada", "--threshold", "0.9"], "without threshold decoding"),
        (["--protocol", "nope"], "unknown protocol nope"),
    ],
)
def test_what_a_protocol_does_not_allow_is_one_line(extra, message, tmp_path, capsys):
    assert (
        main(
            [
                "eval",
                "--task",
                "arithmetic",
                "--n",
                "1",
                "--gen-length",
                "8",
                "--output-dir",
                str(tmp_path),
                "--no-progress",
                *extra,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_evaluation_split_over_two_gloo_processes_writes_the_rows_of_one(tmp_path, tiny_folder):
    data = write_gsm8k(tmp_path / "gsm.jsonl", 5)  # (no --n: torchrun's parser takes --n for one of its own options)
    args = [
        "-m",
        "daca_bench",
        "eval",
        "--model",
        str(tiny_folder),
        "--task",
        "gsm8k",
        "--data-file",
        str(data),
        "--gen-length",
        "8",
        "--batch-size",
        "2",
        "--protocol",
        "d1,dare",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    runs = {}
    for nproc in (1, 2):
        launch = (
            [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_port())]
            if nproc == 2
            else [sys.executable]
        )
        done = subprocess.run(
            [*launch, *args, "--output-dir", str(tmp_path / str(nproc))],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        runs[nproc] = sorted((tmp_path / str(nproc) / "samples.jsonl").read_text().splitlines())
    assert len(runs[1]) == 10 and runs[2] == runs[1]
    assert json.loads((tmp_path / "2" / "record.json").read_text())["processes"] == 2


def test_the_eval_benchmark_s_batched_rows_equal_the_one_at_a_time_reference(tmp_path):
    sys.path.insert(0, str(ROOT))
    from benchmarks.decoding.bench_eval import main as bench

    assert bench(["--quick", "--json", str(tmp_path / "rows.json")]) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    same = {(r["model"], r["setting"].split(" (")[0]): r["identical"] for r in rows}
    assert same[("tiny", "batched")] == "6/6" and same[("LLaDA class (random, small)", "batched")] == "4/4"


def test_d1_poses_a_task_as_it_declares_d1_and_the_other_protocols_read_its_bare_question(monkeypatch, tmp_path):
    from daca_bench.loaders import DATA_FILES_ENV
    from daca_bench.registry import get_task

    monkeypatch.setenv(DATA_FILES_ENV, str(write_gsm8k(tmp_path / "gsm.jsonl")))
    d1, llada = prompts.load_task("d1", "gsm8k", n=2), prompts.load_task("llada", "gsm8k", n=2)
    assert [s.prompt for s in d1.samples] == [s.prompt for s in get_task("gsm8k", protocol="d1", n=2).samples]
    assert [s.prompt for s in llada.samples] == [s.prompt for s in get_task("gsm8k", n=2).samples]
    assert [s.id for s in d1.samples] == [s.id for s in llada.samples]  # one item, posed two ways
    assert all(
        s.metadata["prefill"] == "<reasoning>" and "prefill" not in t.metadata
        for s, t in zip(d1.samples, llada.samples)
    )
    for a in llada.samples:
        assert prompts.fields("gsm8k", a) == {"question": a.prompt.split("Problem: ")[1][:-1]}
    arith = prompts.load_task("d1", "arithmetic", n=2)  # a task declaring no d1 runs as itself
    assert [s.prompt for s in arith.samples] == [s.prompt for s in get_task("arithmetic", n=2).samples]
