"""The installable package: shipped data, task plug-ins (entry points, folders), a light core."""

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from daca_bench.resources import data_dir

from repo_paths import ROOT


def _run(code: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_pyproject_packages_name_every_folder_and_map_the_data():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"daca_bench", *(f"daca_bench.{p.parent.name}" for p in (ROOT / "daca_bench").glob("*/__init__.py"))}
    assert folders <= set(tool["packages"])
    assert {tool["package-dir"][f"daca_bench._data.{n}"] for n in ("tasks", "sandbox", "configs")} == {
        "tasks",
        "sandbox",
        "configs",
    }
    # every folder that ships files is a package of its own (else setuptools warns "Package would be ignored"
    # at set-up): daca_verify's metric script, the configs' paper/ and scored/ folders, the sandbox's worker/
    shipped = {"daca_bench.metrics.daca_verify": ROOT / "daca_bench" / "metrics" / "daca_verify"}
    for name, folder in tool["package-dir"].items():
        shipped |= {
            f"{name}.{p.name}": p
            for p in (ROOT / folder).iterdir()
            if p.is_dir() and not p.name.startswith((".", "_")) and any(f.is_file() for f in p.iterdir())
        }
    assert set(shipped) <= set(tool["packages"]), sorted(set(shipped) - set(tool["packages"]))


def test_data_dirs_resolve_in_the_checkout():
    assert (data_dir("tasks") / "arithmetic.py").is_file()
    assert (data_dir("sandbox") / "worker" / "main.py").is_file()
    assert (data_dir("configs") / "tiny.yaml").is_file()


def test_shipped_preset_found_from_any_folder(tmp_path):
    r = _run(
        """
        from daca_bench.config import load_config, RLConfig
        print(load_config("configs/tiny.yaml", [], RLConfig).train.task)
    """,
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "arithmetic"


def test_verify_core_imports_no_heavy_package(tmp_path):
    rows = {
        "arithmetic": {"expression": "2+3", "completion": "5"},
        "countdown_tiny": {"numbers": [3, 5, 7], "target": 22, "completion": "3*5+7"},
        "json_tiny": {"schema": {"type": "object"}, "completion": "{}"},
    }
    for name, row in rows.items():
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
    r = _run(
        f"""
        import sys
        from daca_bench.cli import main
        for name in {list(rows)!r}:
            assert main(["verify", name, "--input", name + ".jsonl", "--output", name + ".out"]) == 0
        print(sorted(m for m in ("torch", "transformers", "matplotlib", "docker", "pandas", "datasets") if m in sys.modules))
    """,
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
    for name in rows:
        assert json.loads((tmp_path / f"{name}.out").read_text())["status"] == "correct"


PLUGIN = '''
from daca_bench.registry import register_task
from daca_bench.rewards.scoring import field
from daca_bench.types import Reward, Sample, Task


def verify(sample, completion):
    ok = completion.strip() == sample.metadata["word"][::-1]
    return Reward(float(ok), "correct" if ok else "wrong")


@register_task("{name}", family="constraint", version=1)
def build(split="test", n=None, seed=0, records=None):
    """reverse a word"""
    rows = records or [{{"word": "abc"}}, {{"word": "hello"}}]
    samples = [Sample(f"{name}/{{i}}", f"reverse {{r['word']}}", r["word"][::-1], {{"word": field(r, "word")}})
               for i, r in enumerate(rows)]
    return Task("{name}", "constraint", 1, samples[:n], verify, split)
'''


def test_entry_point_plugin_registers_its_tasks(tmp_path):
    (tmp_path / "my_tasks.py").write_text(PLUGIN.format(name="reverse_word"))
    dist = tmp_path / "my_tasks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-tasks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[daca_bench.tasks]\nreverse = my_tasks\n")
    r = _run(
        """
        from daca_bench.registry import get_task
        task = get_task("reverse_word")
        print(task.verify(task.samples[0], "cba").status)
    """,
        tmp_path,
        {"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "correct"


def test_broken_plugin_names_itself(tmp_path):
    (tmp_path / "bad_tasks.py").write_text("raise RuntimeError('boom')\n")
    dist = tmp_path / "bad_tasks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-tasks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[daca_bench.tasks]\nbad = bad_tasks\n")
    r = _run(
        "from daca_bench.registry import list_tasks; list_tasks()",
        tmp_path,
        {"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
    )
    assert r.returncode != 0
    assert "task plug-in 'bad' (bad_tasks" in r.stderr and "boom" in r.stderr


def test_tasks_dir_option_loads_a_folder(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "reverse.py").write_text(PLUGIN.format(name="reverse_dir"))
    (tmp_path / "in.jsonl").write_text(json.dumps({"word": "abc", "completion": "cba"}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "DACA_BENCH_TASKS"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "daca_bench",
            "verify",
            "reverse_dir",
            "--tasks-dir",
            str(folder),
            "--input",
            "in.jsonl",
            "--output",
            "out.jsonl",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["status"] == "correct"
