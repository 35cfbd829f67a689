"""``python -m bench``: run the benchmark suite (see bench/run.py and bench/README.md)."""

from __future__ import annotations

from bench.run import main

raise SystemExit(main())
