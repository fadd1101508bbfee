"""The sandbox image: its recipe (sandbox/), the tag by recipe hash, the offline debootstrap build, the engine."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..resources import data_dir
from .protocol import HOW_TO_START, SandboxUnavailable

SANDBOX_DIR = data_dir("sandbox")
IMAGE_REPO = "daca-bench-sandbox"
RECIPE_FILES = ("build_rootfs.sh", "Dockerfile")


# ---------------------------------------------------------------- image recipe
def recipe_hash() -> str:
    h = hashlib.sha256()
    for name in RECIPE_FILES:
        h.update(name.encode() + b"\0" + (SANDBOX_DIR / name).read_bytes() + b"\0")
    return h.hexdigest()[:12]


def image_tag() -> str:
    return os.environ.get("DACA_BENCH_SANDBOX_IMAGE") or f"{IMAGE_REPO}:{recipe_hash()}"


def apt_source() -> tuple[str, str]:
    """(suite, mirror URI) of this machine's main apt source, read at run time."""
    suite = os.environ.get("DACA_BENCH_SANDBOX_SUITE")
    if not suite:
        release = dict(
            line.strip().split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line
        )
        suite = release.get("VERSION_CODENAME", "").strip('"')
    if os.environ.get("DACA_BENCH_SANDBOX_MIRROR"):
        return suite, os.environ["DACA_BENCH_SANDBOX_MIRROR"]
    files = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    for path in files:
        if not path.is_file() or path.suffix not in (".list", ".sources"):
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".list":
            for line in text.splitlines():
                parts = [p for p in line.split("#")[0].split() if not p.startswith("[")]
                if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                    return suite, parts[1]
        else:
            for stanza in text.split("\n\n"):
                fields = {}
                for line in stanza.splitlines():
                    if ":" in line and not line.startswith(("#", " ")):
                        k, v = line.split(":", 1)
                        fields[k.strip().lower()] = v.split()
                if "deb" in fields.get("types", []) and suite in fields.get("suites", []) and fields.get("uris"):
                    return suite, fields["uris"][0]
    raise SandboxUnavailable(f"no apt source for suite {suite!r} in /etc/apt; set DACA_BENCH_SANDBOX_MIRROR")


def build(force: bool = False, method: str = "auto") -> str:
    """Build (or reuse) the sandbox image for the current recipe; return its tag."""
    client, tag = docker_client(), image_tag()
    if not force and image_exists(client, tag):
        print(f"sandbox image {tag} is up to date (recipe hash); --force rebuilds it", file=sys.stderr)
        return tag
    if method == "auto":
        method = "debootstrap" if os.geteuid() == 0 and shutil.which("debootstrap") else "dockerfile"
    if method == "debootstrap":
        suite, mirror = apt_source()
        cmd = ["bash", str(SANDBOX_DIR / "build_rootfs.sh"), suite, mirror, tag]
    else:
        cmd = ["docker", "build", "-t", tag, "-f", str(SANDBOX_DIR / "Dockerfile"), str(SANDBOX_DIR)]
    print(f"building {tag} ({method}): {' '.join(cmd)}", file=sys.stderr)
    subprocess.run(cmd, check=True)
    return tag


def image_exists(client, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def docker_client():
    try:
        import docker
    except ImportError as e:
        raise SandboxUnavailable(f"the docker Python package is missing ({e}); pip install docker") from e
    try:
        client = docker.from_env(timeout=60)
        client.ping()
        return client
    except Exception as e:  # noqa: BLE001 - any failure here means "no engine"
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise SandboxUnavailable(f"Docker engine not reachable at {where}: {e}. {HOW_TO_START}") from e
