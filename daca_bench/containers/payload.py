"""The worker payload: every module of sandbox/worker/ packed into one `python3 -I -B -c` program.

The container's root is read-only and its /tmp belongs to the programs, so the worker is never
written to disk there: the program carries the package's sources, serves them to `import` from
memory (an import hook whose loader also answers get_source, so tracebacks show the lines) and
runs worker.main.main().  The sources are read at every start, so the worker and the client
never drift apart, and the image (tagged by its recipe files alone, image.py) is not rebuilt
when the worker changes.
"""

from __future__ import annotations

from .image import SANDBOX_DIR

PACKAGE = "worker"
ARG_MAX = 120_000  # one argv string may hold at most 128 KiB (Linux MAX_ARG_STRLEN)

BOOT = '''\
import sys
PACKAGE, SOURCES = {package!r}, {sources!r}


class Finder:
    """Finds and loads the worker's modules from SOURCES (name -> (origin, source))."""

    def find_spec(self, name, path=None, target=None):
        if name not in SOURCES:
            return None
        import importlib.util
        return importlib.util.spec_from_loader(name, self, origin=SOURCES[name][0], is_package=name == PACKAGE)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        origin, source = SOURCES[module.__name__]
        exec(compile(source, origin, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, name):
        return SOURCES[name][1]


sys.meta_path.insert(0, Finder())
from {package}.main import main
main()
'''


def worker_sources() -> dict[str, tuple[str, str]]:
    """Module name -> (origin shown in tracebacks, source) for every .py file of sandbox/worker/."""
    folder = SANDBOX_DIR / PACKAGE
    files = sorted(folder.glob("*.py"))
    if not (folder / "__init__.py").is_file() or not (folder / "main.py").is_file():
        raise FileNotFoundError(f"the sandbox worker package is incomplete in {folder} (needs __init__.py and main.py)")
    return {
        (PACKAGE if f.stem == "__init__" else f"{PACKAGE}.{f.stem}"): (f"sandbox/{PACKAGE}/{f.name}", f.read_text())
        for f in files
    }


def worker_program() -> str:
    """The `-c` program that runs the worker: the boot code above with the package's sources."""
    program = BOOT.format(package=PACKAGE, sources=worker_sources())
    if len(program.encode()) > ARG_MAX:
        raise ValueError(f"the worker payload is {len(program.encode())} bytes, over the {ARG_MAX}-byte argv limit")
    return program
