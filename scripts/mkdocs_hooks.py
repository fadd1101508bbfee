"""mkdocs hook: the site shows the repository's Markdown where it lives, without copies.

README.md, BENCHMARKS.md, results/README.md, tasks/README.md and sandbox/README.md stay at the
top of their folders (where GitHub shows them) and enter the site as pages (ROOT_PAGES). Every
relative link of every page is written as it reads on GitHub, relative to the file's place in
the repository; this hook re-aims it at the site: a link to a page goes to that page, a link
to another file of the repository (a config, a results table, a folder) goes to a copy under
`repo/` (a folder becomes a page listing its files). A link to nothing is left alone, so that
`mkdocs build --strict` fails on it.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]  # replaced by the folder of the mkdocs.yml being built
ROOT_PAGES = {  # repository path -> the page it is in the site
    "README.md": "index.md",
    "BENCHMARKS.md": "benchmarks.md",
    "results/README.md": "results.md",
    "tasks/README.md": "tasks-reference.md",
    "sandbox/README.md": "sandbox-reference.md",
}
COPIES = "repo/"  # other repository files that a page links to
LINK = re.compile(r"(\[[^\]]*\]\()([^)\s]+)(\))")
FENCE = re.compile(r"^\s*(```|~~~)")

_origin: dict[str, str] = {}  # site path of a page -> its repository path


def _tracked(folder: str) -> list[str]:
    """The files git tracks under a folder (all files when git is not there)."""
    try:
        out = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True)
        names = out.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        names = []
    return names or sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*") if p.is_file())


def _links(markdown: str):
    """(start, end, target) of each relative Markdown link outside fenced code."""
    fenced, pos, inside = [], 0, None
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            if inside is None:
                inside = pos
            else:
                fenced.append((inside, pos + len(line)))
                inside = None
        pos += len(line)
    for m in LINK.finditer(markdown):
        target = m.group(2)
        if any(a <= m.start() < b for a, b in fenced) or re.match(r"[a-z][a-z0-9+.-]*:|#|/", target):
            continue
        yield m.start(2), m.end(2), target


def _repo_path(page_repo_path: str, target: str) -> str:
    path = target.partition("#")[0]
    return posixpath.normpath(posixpath.join(posixpath.dirname(page_repo_path), path))


def _site_path(repo_path: str) -> str | None:
    """Where a repository path is in the site, or None when it is not in the repository."""
    if repo_path in ROOT_PAGES:
        return ROOT_PAGES[repo_path]
    if repo_path.startswith("docs/") and (ROOT / repo_path).is_file():
        return repo_path[len("docs/") :]
    if repo_path.startswith("..") or not (ROOT / repo_path).exists():
        return None
    if (ROOT / repo_path).is_dir():
        return f"{COPIES}{repo_path}/index.md"
    return COPIES + repo_path


def on_files(files, config):
    global ROOT
    ROOT = Path(config["config_file_path"]).resolve().parent
    docs_dir = Path(config["docs_dir"]).resolve()
    _origin.clear()
    for f in files.documentation_pages():
        _origin[f.src_uri] = str((docs_dir / f.src_uri).relative_to(ROOT)).replace(os.sep, "/")
    for repo_path, site in ROOT_PAGES.items():
        if not (ROOT / repo_path).is_file():
            continue
        files.append(File.generated(config, site, abs_src_path=str(ROOT / repo_path)))
        _origin[site] = repo_path
    todo = list(_origin.items())
    while todo:  # pages link to copies, and a copied page may link further
        site, repo_path = todo.pop()
        text = (ROOT / repo_path).read_text(encoding="utf-8")
        for _, _, target in _links(text):
            dest = _repo_path(repo_path, target)
            where = _site_path(dest)
            if where is None or not where.startswith(COPIES) or files.get_file_from_path(where):
                continue
            if where.endswith("/index.md") and (ROOT / dest).is_dir():
                listing = "\n".join(f"- `{name}`" for name in _tracked(dest))
                files.append(
                    File.generated(
                        config,
                        where,
                        content=f"# `{dest}/`\n\nThe files of this folder in the repository:\n\n{listing}\n",
                    )
                )
                _origin[where] = dest + "/index.md"
            else:
                files.append(File.generated(config, where, abs_src_path=str(ROOT / dest)))
                if dest.endswith(".md"):
                    _origin[where] = dest
                    todo.append((where, dest))
    return files


def on_page_markdown(markdown, page, config, files):
    repo_path = _origin.get(page.file.src_uri)
    if repo_path is None:
        return markdown
    here = posixpath.dirname(page.file.src_uri)
    out, last = [], 0
    for start, end, target in _links(markdown):
        where = _site_path(_repo_path(repo_path, target))
        if where is None:
            continue  # left as written: the strict build reports it
        anchor = target.partition("#")[2]
        new = posixpath.relpath(where, here or ".") + (f"#{anchor}" if anchor else "")
        out += [markdown[last:start], new]
        last = end
    return "".join(out) + markdown[last:]
