"""``memagent eval``: does memory make a model behave better? Scenarios and benchmarks.

One module per concept: ``scenario`` (the YAML format, loaded with the line of every
value so an error names file, line and what is wrong), ``checks`` (every check kind,
pure functions over what a run observed), ``harness`` (one scenario in a fresh
throwaway agent and database, through the chat session's own code), ``results``
(the JSONL contract, the table, ``compare``), ``metrics`` (the benchmarks' judge-free
scores and recall@k), ``benchmarks`` (LongMemEval and LoCoMo data files replayed as
past conversations), ``suite/`` (the built-in scenarios, package data) and
``mcp_fixture`` (a tiny MCP server a built-in scenario starts).

Invariants:
- A run never touches the user's agents or database: each scenario gets a new
  temporary SQLite file (or, given a scratch server, a new agent with a random name).
- Memory changes only the way a chat makes them: turns through ``Agent.turn`` with
  the approval gate answered per session (``approve: all | none``), ``/remember`` and
  ``/compact`` through the chat's own slash commands, ``reflect`` through
  ``agent.reflection.reflect``.
- The model comes from the caller (the CLI builds it through the registry); this
  package names no provider.
"""
