"""`python -m daca_bench`: the same command line as `daca-bench` (daca_bench/cli.py)."""

import sys

from .cli import main

sys.exit(main())
