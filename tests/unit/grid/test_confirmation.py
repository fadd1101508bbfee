"""The machinery of a confirmation written first (issue #33): a test set drawn disjoint from the
prompts earlier tables scored (registry.draw_test, train.test_exclude), the code a design and a cell
name (provenance.code_tree), a design committed before its run and registered by it
(preregister.register), and the replication report against an exploratory run in parts."""

import json
import subprocess
from pathlib import Path

import pytest

from daca_bench.cli import main
from daca_bench.errors import ConfigError
from daca_bench.experiments.analysis.cellstore import is_run
from daca_bench.experiments.analysis.design import disagreements, read_design
from daca_bench.experiments.grid.preregister import register
from daca_bench.experiments.grid.provenance import CODE_PATHS, code_tree
from daca_bench.registry import draw_test, get_task, prompt_digest, read_excluded

from repo_paths import ROOT


def _list(path: Path, samples) -> Path:
    path.write_text("# scored before\n" + "".join(f"{prompt_digest(s.prompt)} {s.id}\n" for s in samples))
    return path


def test_a_draw_skips_the_listed_prompts_and_repeats_and_is_get_task_s_own_without_a_list(tmp_path):
    plain = get_task("sudoku_tiny", split="test", n=40, seed=3).samples
    assert [s.id for s in draw_test("sudoku_tiny", "test", 40, 3).samples] == [s.id for s in plain]
    listed = _list(tmp_path / "scored.txt", plain[:25])
    assert len(read_excluded(listed)) == 25
    drawn = draw_test("sudoku_tiny", "test", 40, 3, listed).samples
    digests = [prompt_digest(s.prompt) for s in drawn]
    assert len(drawn) == len(set(digests)) == 40 and not set(digests) & read_excluded(listed)
    assert [s.id for s in drawn[:15]] == [s.id for s in plain[25:40]]  # the same draw, the listed ones skipped
    # the same on a second call (every machine draws the same set)
    assert [s.id for s in draw_test("sudoku_tiny", "test", 40, 3, listed).samples] == [s.id for s in drawn]


def test_a_draw_that_cannot_fill_its_size_is_refused_in_one_line(tmp_path):
    every = get_task("arithmetic_tiny", split="test", n=10_000).samples  # a finite split: 510 prompts
    listed = _list(tmp_path / "all.txt", every[:500])
    with pytest.raises(ConfigError, match="only 10 new prompts are left"):
        draw_test("arithmetic_tiny", "test", 20, 0, listed)
    with pytest.raises(ConfigError, match="cannot read the list"):
        draw_test("arithmetic_tiny", "test", 20, 0, tmp_path / "missing.txt")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_code_tree_is_equal_across_commits_that_change_only_results_and_differs_when_code_moves(tmp_path):
    repo = tmp_path / "repo"
    for p in CODE_PATHS:
        target = repo / p if "." in p else repo / p / "x.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# {p}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "code")
    first = code_tree(repo / "daca_bench")
    (repo / "results").mkdir()
    (repo / "results" / "design.json").write_text("{}\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "the design, committed first")
    assert len(first) == 16 and code_tree(repo / "daca_bench") == first
    (repo / "daca_bench" / "x.py").write_text("# changed\n")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "code moves")
    assert code_tree(repo / "daca_bench") != first
    assert code_tree(tmp_path / "nowhere" / "daca_bench") == ""  # not a git checkout


DESIGN = {
    "schema": 1,
    "preset": "p",
    "commit": "abc1234",
    "code_tree": "0123456789abcdef",
    "alpha": 0.05,
    "multiplicity": "holm",
    "bar": "Holm p < 0.05",
    "families": {
        "sudoku": {
            "task": "sudoku_tiny",
            "seeds": [24, 25],
            "steps": 32,
            "test": {
                "split": "test",
                "size": 8,
                "seed": 1,
                "draw": "fresh",
                "exclude": "configs/scored/sudoku_tiny.txt",
            },
        }
    },
    "comparisons": {"primary": [{"family": "sudoku", "variant": "+DACA", "vs": "baseline"}]},
}


def _cell(seed=24, git="abc1235", tree="0123456789abcdef", exclude="configs/scored/sudoku_tiny.txt"):
    return {
        "git": git,
        "code_tree": tree,
        "train": {
            "task": "sudoku_tiny",
            "seed": seed,
            "steps": 32,
            "n_eval": 8,
            "test_seed": 1,
            "eval_split": "test",
            "test_exclude": exclude,
        },
        "loss": {"base": "grpo"},
    }


def test_a_cell_from_a_later_commit_with_the_design_s_code_ran_under_it_and_others_did_not():
    assert disagreements(DESIGN, [_cell(), _cell(seed=25, git="abc1234")]) == []
    assert disagreements(DESIGN, [_cell(tree="ffffffffffffffff")]) == [
        "sudoku: a cell ran from abc1235, the design from abc1234"
    ]
    assert disagreements(DESIGN, [_cell(git="abc1235-dirty")]) == [
        "sudoku: a cell ran from abc1235-dirty, the design from abc1234"
    ]
    assert disagreements(DESIGN, [_cell(exclude="")]) == [
        "sudoku: test exclusion  where the design says configs/scored/sudoku_tiny.txt"
    ]


def test_a_run_registers_the_design_committed_before_it_and_refuses_a_stale_one(tmp_path):
    committed = tmp_path / "results" / "design.json"
    committed.parent.mkdir()
    committed.write_text(json.dumps(DESIGN, indent=2, sort_keys=True) + "\n")
    later = {**DESIGN, "commit": "abc1235"}  # the run: the commit after the design's, same code
    path, how = register(tmp_path / "run", later, committed)
    assert path.read_text() == committed.read_text() and "committed before the run" in how
    assert read_design(tmp_path / "run")["commit"] == "abc1234"
    with pytest.raises(ConfigError, match="written from other code"):
        register(tmp_path / "run2", {**later, "code_tree": "ffffffffffffffff"}, committed)
    subset = {**later, "families": {"sudoku": {**DESIGN["families"]["sudoku"], "seeds": [24]}}}
    path, how = register(tmp_path / "run3", subset, committed)  # --seeds 24: not the committed design
    assert "not the design committed" in how and "families" in how and read_design(path.parent)["commit"] == "abc1235"


def test_design_only_writes_tiny_full_s_design_and_runs_nothing(tmp_path, capsys):
    out = tmp_path / "design"
    assert main(["reproduce", "--preset", "tiny-full", "--design-only", "--output-dir", str(out), "--allow-dirty"]) == 0
    design = read_design(out)
    assert sorted(out.iterdir()) == [out / "design.json"] and "commit it before the run" in capsys.readouterr().out
    fams = design["families"]
    assert fams["sudoku"]["seeds"] == list(range(24, 40)) and fams["code"]["steps"] == 64
    assert fams["math"]["test"] == {"split": "test", "size": 510, "seed": 0, "draw": fams["math"]["test"]["draw"]}
    for label in ("code", "json", "sudoku"):
        test = fams[label]["test"]
        assert test["seed"] == 1 and test["exclude"] == f"configs/scored/{fams[label]['task']}.txt"
        assert test["excluded"] >= 1024 and len(test["ids_sha256"]) == 16 and "neither among" in test["draw"]
    assert "math" in design["notes"] and {"primary", "secondary"} == set(design["comparisons"])
    assert {(c["family"], c["variant"], c["vs"]) for c in design["comparisons"]["primary"]} == {
        (f, v, vs) for f in fams for v, vs in (("baseline", "start"), ("+DACA", "baseline"))
    }


def test_committed_tiny_full_design_is_what_the_preset_makes(tmp_path):
    """results/tiny-full/design.json, committed before the run, matches the preset's code but for the
    commit and code it was written from (the run refuses a design whose code_tree is not its own)."""
    committed = ROOT / "results" / "tiny-full" / "design.json"
    if not committed.is_file():
        pytest.skip("results/tiny-full/design.json is not in this checkout")
    assert (
        main(["reproduce", "--preset", "tiny-full", "--design-only", "--output-dir", str(tmp_path), "--allow-dirty"])
        == 0
    )
    now, fixed = read_design(tmp_path), read_design(committed.parent)
    loose = ("commit", "code_tree", "written", "date")
    assert {k: v for k, v in now.items() if k not in loose} == {k: v for k, v in fixed.items() if k not in loose}


def test_a_reference_in_parts_takes_each_task_from_the_last_folder_that_has_it():
    """The exploratory four-area run as the confirmation's reference: tiny-full-exploratory, then its
    sudoku (16 seeds) and code (64 steps) supplements, read as one run (results.union)."""
    from daca_bench.experiments.analysis.replicate import seeds_of
    from daca_bench.experiments.analysis.results import load_table, union

    parts = [ROOT / "results" / n for n in ("tiny-full-exploratory", "tiny-full-sudoku16", "tiny-full-code64")]
    if not all(is_run(p) for p in parts):
        pytest.skip("the exploratory tiny-full folders are not in this checkout")
    df, start = union(parts)
    steps = {t: set(g["config"].map(lambda c: c["train"]["steps"])) for t, g in df.groupby("task")}
    assert steps == {"python_tiny": {64}, "json_tiny": {32}, "arithmetic_tiny": {64}, "sudoku_tiny": {32}}
    assert seeds_of(parts) == {
        "python_tiny": set(range(8)),
        "json_tiny": set(range(8)),
        "arithmetic_tiny": set(range(8)),
        "sudoku_tiny": set(range(16)),
    }
    assert set(start) == set(steps)
    table = load_table(parts)
    row = table[(table["task"] == "sudoku_tiny") & (table["variant"] == "+DACA")].iloc[0]
    assert row["seeds"] == 16 and load_table(parts[:1]).equals(load_table(parts[0]))


def test_the_committed_tiny_full_design_is_current_while_no_cell_has_run():
    """A design written from other code is refused by its run (stale), so until its first cell runs
    the committed results/tiny-full/design.json must name this checkout's code tree. After a change
    under CODE_PATHS: commit it, then `daca-bench reproduce --preset tiny-full --design-only
    --output-dir DIR` on the clean tree, copy DIR/design.json over it and commit that."""
    root = ROOT
    folder = root / "results" / "tiny-full"
    tree = code_tree(root / "daca_bench")
    if not tree or is_run(folder):
        pytest.skip("not a git checkout, or the run has started (its cells name their own code)")
    design = json.loads((folder / "design.json").read_text())
    assert design["code_tree"] == tree, "results/tiny-full/design.json is stale: rewrite it (this test's docstring)"
