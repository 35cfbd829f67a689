"""``python -m bench``: run the benchmark suite (see bench/run.py and bench/README.md)."""

from __future__ import annotations

import sys

if sys.argv[1:2] == ["context"]:
    # ``python -m bench context``: the context-budget and episodic-memory figures.
    from bench.context import main as context_main

    raise SystemExit(context_main(sys.argv[2:]))

if sys.argv[1:2] == ["secrets"]:
    # ``python -m bench secrets``: memagent's secret scanner against detect-secrets.
    from bench.secrets import main as secrets_main

    raise SystemExit(secrets_main(sys.argv[2:]))

if sys.argv[1:2] == ["prompts"]:
    # ``python -m bench prompts``: every template's system prompt and tools in tokens.
    from bench.prompt_sizes import main as prompts_main

    raise SystemExit(prompts_main(sys.argv[2:]))

if sys.argv[1:2] == ["local"]:
    # ``python -m bench local``: the local model's load time, time to first token and tokens/s.
    from bench.local_model import main as local_main

    raise SystemExit(local_main(sys.argv[2:]))

if sys.argv[1:2] == ["providers"]:
    # ``python -m bench providers``: the OpenAI-compatible provider's per-turn cost against Anthropic's.
    from bench.provider_overhead import main as providers_main

    raise SystemExit(providers_main(sys.argv[2:]))

if sys.argv[1:2] == ["eval"]:
    # ``python -m bench eval``: memagent eval's own cost per scenario, model time excluded.
    from bench.eval_overhead import main as eval_main

    raise SystemExit(eval_main(sys.argv[2:]))

if sys.argv[1:2] == ["concurrency"]:
    # ``python -m bench concurrency``: many sessions on one Postgres, directly and through PgBouncer.
    from bench.concurrency import main as concurrency_main

    raise SystemExit(concurrency_main(sys.argv[2:]))

if any(a == "--agents" or a.startswith("--agents=") for a in sys.argv[1:]):
    # ``python -m bench --agents N``: many agents on one database (bench/scale.py has its
    # own options: --files-per-agent, --pg, --hybrid, ...).
    from bench.scale import main as scale_main

    raise SystemExit(scale_main(sys.argv[1:]))

from bench.run import main  # noqa: E402 (the suite's imports are heavier)

raise SystemExit(main())
