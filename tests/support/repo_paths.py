"""Where the tests find the repository, wherever their module sits under tests/ (unit/<room>/,
integration/, docs/): the repository's root, the committed fixtures and the task doubles.

    from repo_paths import FIXTURES, ROOT     # tests/support is on pytest's pythonpath (pyproject.toml)
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TASK_DOUBLES = ROOT / "tests" / "task_doubles"
