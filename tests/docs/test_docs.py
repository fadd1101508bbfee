"""The documentation stays true to the repository: no references to files a user does not
have, no broken relative links or anchors, every DPS / SML knob documented in docs/method.md,
and every function the docs cite importable under the name they cite."""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from daca_bench.config import DPSConfig, SMLConfig

from repo_paths import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
METHOD = ROOT / "docs" / "method.md"
OUTSIDE = ("shared/" + "design", "daca" + "-spec")  # split so that this file does not match itself
SCANNED = ["README.md", "docs", "daca_bench", "tasks", "notebooks"]

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
DOTTED = re.compile(r"\bdaca_bench(?:\.[A-Za-z_]\w*)+")
NOT_MODULES = {"daca_bench.tasks"}  # the entry-point group of third-party tasks, a name but no module
FILE_PATH = re.compile(r"\bdaca_bench/[\w/]*\w\.py\b")
# a test, benchmark or script a page names (tests/ and benchmarks/ are in folders: issue 54)
REPO_PATH = re.compile(r"(?<![\w/.-])(?:tests|benchmarks|scripts)/[\w/-]*\w\.(?:py|sh|yaml)\b")


def _text_files(names):
    for name in names:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix in (".pyc", ".png", ".pdf"):
                continue
            yield f


def test_no_reference_to_files_outside_the_repository():
    hits = []
    for f in _text_files(SCANNED):
        text = f.read_text(encoding="utf-8", errors="replace")
        hits += [f"{f.relative_to(ROOT)}: {word}" for word in OUTSIDE if word in text]
    assert not hits, "references to files users do not have:\n" + "\n".join(hits)


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    out, seen = set(), {}
    in_code = False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m and not in_code:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(md: Path) -> list[str]:
    """Relative links (and anchors into Markdown files) of one page that point nowhere."""
    bad = []
    for target in LINK.findall(md.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            bad.append(f"{md.name}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{md.name}: {target} (no such heading)")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(page):
    assert not broken_links(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_paths_exist(page):
    missing = [p for p in FILE_PATH.findall(page.read_text(encoding="utf-8")) if not (ROOT / p).exists()]
    assert not missing, f"{page.name} names modules that do not exist: {missing}"


@pytest.mark.parametrize(
    "page", [*PAGES, ROOT / "BENCHMARKS.md", ROOT / "tasks" / "README.md"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_test_benchmark_and_script_paths_exist(page):
    """A moved test or benchmark leaves no page naming its old path (a user's own files are under my_*)."""
    text = page.read_text(encoding="utf-8")
    missing = [
        p for p in REPO_PATH.findall(text) if not (ROOT / p).exists() and "sort4" not in p and "reverse" not in p
    ]
    assert not missing, f"{page.name} names files that do not exist: {missing}"
    assert REPO_PATH.findall("see tests/unit/rl/test_cache.py and my_tests/test_task_x.py") == [
        "tests/unit/rl/test_cache.py"
    ]


def test_link_checker_catches_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-heading) [gone](missing.md) [bad](other.md#nope) [web](https://x.org/y)\n")
    assert broken_links(page) == ["page.md: missing.md (no such file)", "page.md: other.md#nope (no such heading)"]


def test_github_slugs():
    assert (
        slug("1. What the paper fixes and what this project chose")
        == "1-what-the-paper-fixes-and-what-this-project-chose"
    )
    assert (
        slug("6. Masks keyed by (seed, sequence, inner iteration)") == "6-masks-keyed-by-seed-sequence-inner-iteration"
    )
    assert slug("Reproducing the ablation: `daca-bench reproduce`") == "reproducing-the-ablation-daca-bench-reproduce"


@pytest.mark.parametrize("section,cls", [("dps", DPSConfig), ("sml", SMLConfig)])
def test_method_documents_every_knob(section, cls):
    text = METHOD.read_text(encoding="utf-8")
    missing = [f"{section}.{f.name}" for f in dataclasses.fields(cls) if f"`{section}.{f.name}`" not in text]
    assert not missing, f"docs/method.md does not document {missing}"


def resolve(dotted: str):
    """Import the longest importable module prefix of a dotted name, then follow attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError: the docs cite a name that does not exist
        return obj
    raise ModuleNotFoundError(dotted)


def test_method_cites_functions_that_exist():
    names = sorted(set(DOTTED.findall(METHOD.read_text(encoding="utf-8"))))
    assert len(names) >= 20, "docs/method.md should name the functions behind its formulas"
    unresolved = []
    for name in names:
        try:
            resolve(name)
        except (ImportError, AttributeError):
            unresolved.append(name)
    assert not unresolved, f"docs/method.md cites names that do not import: {unresolved}"


@pytest.mark.parametrize("page", [p for p in PAGES if p != METHOD], ids=lambda p: str(p.relative_to(ROOT)))
def test_other_pages_cite_names_that_exist(page):
    for name in sorted(set(DOTTED.findall(page.read_text(encoding="utf-8"))) - NOT_MODULES):
        resolve(name)


def test_resolve_rejects_a_missing_name():
    with pytest.raises(AttributeError):
        resolve("daca_bench.rl.credit.no_such_function")


# The documentation site (mkdocs.yml): it builds in strict mode, and strict mode catches what it must.
def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (the `docs` extra: pip install -e '.[docs]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed (the `docs` extra)")
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (the `docs` extra)")
    done = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    site = tmp_path / "site"
    assert (site / "index.html").is_file() and (site / "benchmarks" / "index.html").is_file()
    assert 'id="daca_bench.rl.credit.dps_weights"' in (site / "api" / "rl" / "index.html").read_text(encoding="utf-8")
    # README.md links docs/method.md; in the site that is a sibling page
    assert 'href="method/' in (site / "index.html").read_text(encoding="utf-8")


def test_strict_build_fails_on_a_broken_link_and_anchor(tmp_path):
    """The hook leaves a link to nothing as written, so mkdocs --strict reports it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[gone](missing.md) [bad](other.md#nope)\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    text = text.replace("scripts/mkdocs_hooks.py", str(ROOT / "scripts" / "mkdocs_hooks.py"))
    text = re.sub(r"(?ms)^  - mkdocstrings:.*?(?=^\S)", "", text)  # the API pages are not in this tiny site
    text = re.sub(r"(?ms)^nav:.*", "", text)
    config.write_text(text)
    done = _mkdocs(config, tmp_path / "site")
    assert done.returncode != 0
    assert "missing.md" in done.stderr and "nope" in done.stderr


def test_api_core_page_names_every_top_level_module():
    page = (ROOT / "docs" / "api" / "core.md").read_text(encoding="utf-8")
    modules = sorted(p.stem for p in (ROOT / "daca_bench").glob("*.py") if not p.stem.startswith("__"))
    missing = [m for m in modules if f"::: daca_bench.{m}\n" not in page]
    assert not missing, f"docs/api/core.md does not render {missing}"


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 220


# (README phrase, results folder, family, variant, vs): every interval the README's "What it found"
# states comes from that folder's table.csv, rounded as the table rounds it
README_NUMBERS = [
    ("+4.3** * [+1.2, +7.5]", "tiny", "constraint", "+DACA", "baseline"),
    ("+10.9** * [+7.9, +13.9]", "tiny", "constraint", "baseline", "start"),
    ("+3.9** pp [+1.9, +5.8]", "tiny-ablation", "constraint", "+DACA", "baseline"),
    ("+3.2 [-0.6, +7.0]", "tiny-ablation", "constraint", "+SML", "baseline"),
    ("+6.6** * [+2.2, +11.0]", "tiny-full-exploratory", "constraint", "+DACA", "baseline"),
    ("+0.4 [-1.1, +1.9]", "tiny-full-exploratory", "math", "+DACA", "baseline"),
    ("+1.3 [-1.2, +3.8]", "tiny-full-exploratory", "json", "+DACA", "baseline"),
    ("+0.0 [-1.3, +1.4]", "tiny-full-exploratory", "code", "+DACA", "baseline"),
    ("+5.1** * [+2.4, +7.8]", "tiny-full-sudoku16", "constraint", "+DACA", "baseline"),
    ("+3.0 [-4.5, +10.6]", "tiny-cache", "json [none]", "+DACA", "baseline"),
    ("-2.2 [-8.9, +4.5]", "tiny-cache", "json [prefix]", "+DACA", "baseline"),
    ("+2.2\n[-0.4, +4.9]", "tiny-cache", "json [dual]", "+DACA", "baseline"),
    ("+0.6 [-0.7, +1.9]", "tiny-full-code64", "code", "+DACA", "baseline"),
    # tiny-bases: FOLDER:BASE picks the block (every base has a +DACA-vs-baseline row)
    ("+4.5** * [+2.0, +7.0]", "tiny-bases:grpo", "constraint", "+DACA", "baseline"),
    ("+7.4** * [+5.0, +9.9]", "tiny-bases:gspo", "constraint", "+DACA", "baseline"),
    ("+4.5** * [+1.9, +7.1]", "tiny-bases:reinforce_pp", "constraint", "+DACA", "baseline"),
    ("+4.8** * [+1.9, +7.8]", "tiny-bases:wd1", "constraint", "+DACA", "baseline"),
    ("+2.8 [+0.7, +5.0]", "tiny-bases:espo", "constraint", "baseline", "grpo baseline"),
    ("-1.9 [-3.7, -0.2]", "tiny-bases:gspo", "constraint", "baseline", "grpo baseline"),
    ("-6.4** * [-9.5, -3.3]", "tiny-bases:gspo", "constraint", "baseline", "grpo +DACA"),
    ("+3.9** * [+1.5, +6.2]", "tiny-bases:grpo", "constraint", "baseline@+DACA-compute", "grpo +DACA"),
    ("+6.4** * [+3.4, +9.4]", "tiny-full", "math", "baseline", "start"),
    ("+11.6** * [+8.1, +15.0]", "tiny-full", "constraint", "baseline", "start"),
    ("+8.4** * [+5.5, +11.3]", "tiny-full", "json", "baseline", "start"),
    ("+4.3** * [+1.4, +7.2]", "tiny-full", "code", "baseline", "start"),
    ("+1.9** * [+0.7, +3.0]", "tiny-full", "math", "+DACA", "baseline"),
    ("+2.8 [+0.1, +5.6]", "tiny-full", "constraint", "+DACA", "baseline"),
    ("+0.3 [-1.8, +2.5]", "tiny-full", "json", "+DACA", "baseline"),
    ("+1.0 [-0.7, +2.7]", "tiny-full", "code", "+DACA", "baseline"),
    ("-2.9 [-39.1, +33.3]", "tiny-compute", "constraint", "+DACA@32", "grpo baseline@80"),
]


@pytest.mark.parametrize("phrase,folder,family,variant,vs", README_NUMBERS)
def test_every_readme_interval_matches_its_table_csv(phrase, folder, family, variant, vs):
    import csv
    import re

    readme = (ROOT / "README.md").read_text().replace("\n> ", "\n")  # the exploratory tables are a blockquote
    assert phrase in readme, f"README no longer says {phrase!r}: update README_NUMBERS with the text"
    folder, _, base = folder.partition(":")
    with open(ROOT / "results" / folder / "table.csv") as f:
        row = next(
            r
            for r in csv.DictReader(f)
            if (r["family"], r["variant"], r["vs"]) == (family, variant, vs) and (not base or r["base"] == base)
        )
    delta, lo, hi = (float(x) for x in re.findall(r"[-+]\d+\.\d", phrase))
    # the CSV keeps 4 significant digits (-39.05): the README quotes table.md's rounding of the full value
    assert (delta, lo, hi) == pytest.approx(tuple(float(row[k]) for k in ("delta_pp", "lo", "hi")), abs=0.051)
    after = readme[readme.index(phrase) + len(phrase) :][:60]
    starred = " * " in phrase or "adjusted p <" in after  # a star, or the adjusted p written out
    assert starred == (row["sig"] == "True")


# (page, phrase, task, variant, column): every difference between the two runs and every pooled
# estimate that README.md or results/README.md quotes from tiny-full's replication report
# (whitespace-normalised; the phrase's three numbers are the estimate and its 95 % interval).
REPLICATION_NUMBERS = [
    ("README.md", "; +1.5 [-0.3, +3.3]", "arithmetic_tiny", "+DACA", "diff"),
    ("README.md", "; -2.3 [-6.0, +1.4]", "sudoku_tiny", "+DACA", "diff"),
    ("README.md", "(one df) to +4.0 [-10.6, +18.6]", "sudoku_tiny", "+DACA", "pooled"),
    ("README.md", "; -0.9 [-4.0, +2.1]", "json_tiny", "+DACA", "diff"),
    ("README.md", "; +0.4 [-1.7, +2.5]", "python_tiny", "+DACA", "diff"),
    ("README.md", "sudoku +SML, -3.1 [-6.6, +0.4]", "sudoku_tiny", "+SML", "diff"),
    ("results/README.md", "sudoku +SML's, -3.1 [-6.6, +0.4]", "sudoku_tiny", "+SML", "diff"),
    ("results/README.md", "differs by -2.3 [-6.0, +1.4]", "sudoku_tiny", "+DACA", "diff"),
    ("results/README.md", "sudoku's +DACA is +4.0 [-10.6, +18.6]", "sudoku_tiny", "+DACA", "pooled"),
    ("results/README.md", "differs by +1.5 [-0.3, +3.3]", "arithmetic_tiny", "+DACA", "diff"),
    ("results/README.md", "math's +1.2 [-8.3, +10.7]", "arithmetic_tiny", "+DACA", "pooled"),
    ("results/README.md", "json +0.7 [-8.3, +9.8]", "json_tiny", "+DACA", "pooled"),
    ("results/README.md", "code +0.8 [-5.8, +7.3]", "python_tiny", "+DACA", "pooled"),
]


def _replication_rows():
    """tiny-full's replication.md, row by row: {(task, variant): {column: cell}} (the report's
    own rounding; its CSV keeps 4 significant digits, which can round the other way)."""
    lines = [
        line
        for line in (ROOT / "results" / "tiny-full" / "replication.md").read_text().splitlines()
        if line.startswith("| ")
    ]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = ([c.strip() for c in line.strip("|").split("|")] for line in lines[1:])
    return {(r["task"], r["variant"]): r for r in (dict(zip(head, c)) for c in cells)}


@pytest.mark.parametrize("page,phrase,task,variant,column", REPLICATION_NUMBERS)
def test_every_replication_number_matches_the_report(page, phrase, task, variant, column):
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    assert phrase in text, f"{page} no longer says {phrase!r}: update REPLICATION_NUMBERS with the text"
    row = _replication_rows()[(task, variant)]
    quoted = re.findall(r"[-+]\d+\.\d", phrase)
    cell = row["difference [95 % CI]" if column == "diff" else "pooled [95 % CI]"]
    assert quoted == re.findall(r"[-+]\d+\.\d", cell)


AREA_TASK = {"math": "arithmetic_tiny", "constraint": "sudoku_tiny", "JSON": "json_tiny", "code": "python_tiny"}


def test_replication_verdicts_are_the_reports():
    """The per-row verdicts README.md and results/README.md print for tiny-full are the report's
    statuses (the difference between the runs tested, not significance in one run only), and no
    page keeps a verdict of the old rule."""
    rows = _replication_rows()
    results = (ROOT / "results" / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"^\| \w+ \| (\w+) \| (baseline|\+\w+) \|.*\| [^|]*?, \**([a-z][^|]*?)\** \|$", results, re.M)
    assert len(found) == 16
    assert all(status == rows[(task, variant)]["status"] for task, variant, status in found)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"^\| (\w+) \| [^|]+ \| [^|]+ \| \+[\d.]+ \| ([a-z ]+) \(", readme, re.M)
    assert len(found) == 4  # the +DACA row's status, its words before the parenthesis (MDE in the report's)
    assert all(rows[(AREA_TASK[area], "+DACA")]["status"].startswith(status) for area, status in found)
    for page in ("README.md", "results/README.md", "docs/reproducing.md", "docs/replicating.md"):
        text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
        for old in ("conclusion differs", "did not replicate", "estimate outside", "The exploratory reading did not"):
            assert old not in text, f"{page}: {old!r} is a verdict of the old replication rule"


def test_the_command_line_page_names_every_preset():
    """docs/cli.md's `reproduce` row lists the presets by name (the llada-TASK ones as one pattern): a preset added
    to experiments/grid/presets.py and left off the page fails here (the row had drifted three presets behind)."""
    from daca_bench.experiments.grid.presets import PRESETS

    row = next(line for line in (ROOT / "docs" / "cli.md").read_text().splitlines() if line.startswith("| `reproduce"))
    named = set(re.search(r"--preset ([^\]]+)\]", row).group(1).replace("\\|", "|").split("|"))
    assert {n for n in PRESETS if not n.startswith("llada-")} <= named and "llada-TASK" in named
