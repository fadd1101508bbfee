"""A task of one's own, as a new user makes it (issue 45): `daca-bench new-task` writes a task file and
its test from the template, `daca-bench tasks --check` runs the task battery (daca_bench/rewards/battery.py,
the checks tests/unit/rewards/test_tasks_battery.py runs) on it, `--show` prints its prompts as the trainer renders
them; on a task folder (--tasks-dir) and on an installed plug-in (entry point)."""

import json
import os
import subprocess
import sys

from daca_bench import registry
from daca_bench.cli import main
from daca_bench.rewards.stock import exact, json_schema, numeric, pattern

from repo_paths import ROOT


def test_new_task_check_and_show_on_a_task_folder(tmp_path, fresh, capsys):
    folder, tests = tmp_path / "my_tasks", tmp_path / "my_tests"
    assert main(["new-task", "sort4", "--dir", str(folder), "--test-dir", str(tests)]) == 0
    out = capsys.readouterr().out
    assert f"--tasks-dir {folder} --check sort4" in out and (folder / "sort4.py").is_file()
    assert main(["tasks", "--tasks-dir", str(folder), "--check", "sort4"]) == 0
    out = capsys.readouterr().out
    assert f"from {folder / 'sort4.py'}" in out and "sort4: 9 of 9 checks pass" in out
    for name in ("spec", "gold", "empty", "values", "junk", "ids", "disjoint", "deterministic", "lengths"):
        assert f"ok    {name}" in out
    assert main(["tasks", "--show", "sort4", "--split", "dev", "-n", "5", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    spec = registry.task_spec("sort4")
    assert spec.splits == ("train", "dev", "test") and spec.cluster == "answer"
    dev = registry.get_task("sort4", split="dev", n=5).samples
    assert rows == [{"id": s.id, "cluster": s.target, "prompt": s.prompt, "target": s.target} for s in dev]
    assert main(["tasks", "--show", "sort4", "--split", "dev", "-n", "2"]) == 0
    text = capsys.readouterr().out
    assert f"[1] {dev[0].id}  (cluster {dev[0].target})" in text and f"    {dev[0].prompt.rstrip()}⏎" in text


def test_the_written_test_passes_and_the_generator_cannot_loop_forever(tmp_path, fresh):
    assert main(["new-task", "sort4", "--dir", str(tmp_path / "t"), "--test-dir", str(tmp_path / "tt")]) == 0
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tt")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0 and "6 passed" in r.stdout, r.stdout + r.stderr
    source = (tmp_path / "t" / "sort4.py").read_text()
    assert "for _ in range(MAX_DRAWS * n):" in source and "while" not in source


def test_new_task_refuses_what_it_would_break(tmp_path, fresh, capsys):
    assert main(["new-task", "sort4", "--dir", str(tmp_path), "--test-dir", str(tmp_path / "t")]) == 0
    capsys.readouterr()
    for argv, says in (
        (
            ["new-task", "sort4", "--dir", str(tmp_path), "--test-dir", str(tmp_path / "u")],
            "exists; new-task never overwrites",
        ),
        (["new-task", "Sort-4"], "a task name is lower case letters"),
        (["new-task", "arithmetic", "--dir", str(tmp_path / "x")], "is registered already"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err


def test_check_names_each_failing_check_and_exits_1(tmp_path, fresh, capsys):
    main(["new-task", "bad4", "--dir", str(tmp_path), "--test-dir", str(tmp_path / "t")])
    path = tmp_path / "bad4.py"
    text = path.read_text().replace(
        'return exact(sample.metadata["answer"], completion)',
        'return exact(sample.metadata["answer"][::-1], completion)',
    )
    text = text.replace('hash_split(f"{NAME}/{s.metadata[CLUSTER]}") == split', "True")  # every split alike
    path.write_text(text.replace("stable_seed(NAME, split, seed)", "stable_seed(NAME, seed)"))
    capsys.readouterr()
    assert main(["tasks", "--tasks-dir", str(tmp_path), "--check", "bad4"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  gold" in out and "its gold target" in out and "scores wrong" in out
    assert "FAIL  disjoint" in out and "share" in out and "ok    empty" in out
    assert "bad4: 7 of 9 checks pass; failed: gold, disjoint" in out


PLUGIN_DIST = "[daca_bench.tasks]\nsorting = my_sorting.sort4p\n"


def test_check_and_show_an_installed_plug_in(tmp_path, fresh):
    """The template's task installed as a package with an entry point (no --tasks-dir): checked and shown."""
    pkg = tmp_path / "site" / "my_sorting"
    main(["new-task", "sort4p", "--dir", str(pkg), "--test-dir", str(tmp_path / "t")])
    (pkg / "__init__.py").write_text("")
    dist = tmp_path / "site" / "my_sorting-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-sorting\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(PLUGIN_DIST)
    env = {
        **{k: v for k, v in os.environ.items() if k != "DACA_BENCH_TASKS"},
        "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path / 'site'}",
    }
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "daca_bench", "tasks", *a],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    r = run("--check", "sort4p")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"from {pkg / 'sort4p.py'}" in r.stdout and "sort4p: 9 of 9 checks pass" in r.stdout
    r = run("--show", "sort4p", "--split", "dev", "-n", "5")
    assert r.returncode == 0 and r.stdout.count("\n[") == 5 and "sort4p dev: 5 sample(s)" in r.stdout, r.stderr


def test_show_renders_prompts_with_the_model_s_chat_template(tmp_path, fresh, capsys):
    from daca_bench.chars import build_char_tokenizer

    tok = build_char_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    tok.save_pretrained(tmp_path / "tok")
    assert main(["tasks", "--show", "arithmetic_tiny", "-n", "1", "--model", str(tmp_path / "tok"), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    prompt = registry.get_task("arithmetic_tiny", n=1).samples[0].prompt
    assert row["prompt"] == f"<user>{prompt}<assistant>"
    assert main(["tasks", "--show", "arithmetic_tiny", "-n", "1", "--model", str(tmp_path / "tok")]) == 0
    out = capsys.readouterr().out
    assert "chat template, one user message plus the prefill, as train.chat_template=true" in out
    assert f"{len(row['prompt'])} prompt tokens" in out  # one token a character
    assert (
        main(["tasks", "--show", "arithmetic_tiny", "-n", "1", "--model", str(tmp_path / "tok"), "--raw", "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["prompt"] == prompt


def test_the_stock_scorers():
    assert exact("0123", "<answer>  0123 </answer>").status == "correct" and exact("Paris", "paris").value == 1.0
    assert exact("Paris", "paris", case=True).status == "wrong" and exact("x", "  ").status == "no_answer"
    assert numeric("72", "so 72.0").status == "correct" and numeric("1/2", "0.5").status == "correct"
    assert pattern(r"\d{3}-\d{4}", "<answer>555-1234</answer>").status == "correct"
    assert pattern(r"\d{3}-\d{4}", "call 555-1234").status == "wrong"
    assert json_schema({"type": "object", "required": ["a"]}, '{"a": 1}').status == "correct"
    assert json_schema({"type": "object", "required": ["a"]}, '{"b": 1}').status == "wrong"
