"""The LongMemEval and LoCoMo adapters of ``memagent eval`` on small files in their published formats.

The fixtures (``tests/fixtures/eval/``) follow the benchmarks' own layouts: LongMemEval's
list of instances (``question_id``, ``question_type``, ``question``, ``answer``,
``haystack_session_ids``, ``haystack_dates``, ``haystack_sessions``, ``answer_session_ids``)
and LoCoMo's samples (``conversation`` with ``speaker_a``/``speaker_b``/``session_N``/
``session_N_date_time``, ``qa`` with ``evidence`` such as ``D1:3`` and ``category``).
Retrieval-only runs on SQLite and on Postgres; questions are answered by the oracle model
through the real session, and graded by a judge model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.eval_oracle import OracleModel
from memagent.agent.evals import benchmarks
from memagent.agent.evals.metrics import contains, exact_match, normalize, recall_at_k, token_f1
from memagent.agent.model.scripted import ScriptedModel
from tests.cli_helpers import err, out, run

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
LME = FIXTURES / "longmemeval_small.json"
LOCOMO = FIXTURES / "locomo_small.json"


def test_metrics() -> None:
    assert normalize("The Blue, vase!") == "blue vase"
    assert exact_match("a blue vase.", "A blue vase") and not exact_match("blue", "a blue vase")
    assert contains("She made a blue vase for her gran", "A blue vase") and not contains("bluevase", "blue vase")
    assert token_f1("blue vase", "a blue vase") == 1.0 and token_f1("", "x") == 0.0
    assert token_f1("red vase", "blue vase") == pytest.approx(0.5)
    assert recall_at_k(["2", "1"], ["1"], 1) == 0.0 and recall_at_k(["2", "1"], ["1"], 2) == 1.0
    assert recall_at_k(["1"], [], 5) == 1.0


def test_longmemeval_is_read_as_published() -> None:
    histories = benchmarks.longmemeval(LME)
    assert [h.id for h in histories] == ["lme-bike-colour", "lme-gym-days"]
    first = histories[0]
    assert [s[0] for s in first.sessions] == ["s-cooking", "s-bicycle", "s-travel"]
    assert first.questions[0].evidence == ["s-bicycle"] and first.questions[0].gold == "green"
    # A session that opens with the assistant gets a user turn first; roles alternate.
    books = histories[1].sessions[1][2]
    assert [m["role"] for m in books] == ["user", "assistant", "user", "assistant"]
    assert books[0]["content"][0]["text"].startswith("[conversation of 2023/06/10 (Sat) 14:30]")


def test_locomo_is_read_as_published() -> None:
    (sample,) = benchmarks.locomo(LOCOMO)
    assert [s[0] for s in sample.sessions] == ["1", "2", "3"]
    assert sample.sessions[0][1] == "1:56 pm on 8 May, 2023"
    # Melanie (speaker_b, the assistant) spoke first: an empty user turn opens the thread.
    assert [m["role"] for m in sample.sessions[1][2]] == ["user", "assistant", "user", "assistant"]
    assert [q.evidence for q in sample.questions] == [["1"], ["2"], ["3"], ["3"]]
    assert sample.questions[3].gold == "a greyhound" and sample.questions[3].kind == "5"


@pytest.mark.parametrize("kind", ["longmemeval", "locomo"])
def test_a_file_in_another_format_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question": "x"}]), "utf-8")
    with pytest.raises(benchmarks.BenchmarkError, match="not (LongMemEval|LoCoMo)'s format"):
        benchmarks.load(kind, bad)  # type: ignore[arg-type]
    proc = run("eval", f"--{kind}", str(bad), "--retrieval-only")
    assert proc.returncode == 2
    assert err(proc).startswith("memagent: ") and "format" in err(proc) and "Traceback" not in err(proc)
    bad.write_text("{not json", "utf-8")
    proc = run("eval", f"--{kind}", str(bad), "--retrieval-only")
    assert proc.returncode == 2 and "not JSON" in err(proc)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_retrieval_only_reports_recall_at_k_on_both_databases(backend: str, tmp_path: Path,
                                                              request: pytest.FixtureRequest) -> None:
    scratch = [] if backend == "sqlite" else ["--scratch-db", request.getfixturevalue("fresh_pg_url")]
    for kind, path, questions in (("locomo", LOCOMO, 4), ("longmemeval", LME, 2)):
        out_file = tmp_path / f"{kind}-{backend}.jsonl"
        proc = run("eval", f"--{kind}", str(path), "--retrieval-only", "--top", "1", "--out", str(out_file),
                   *scratch)
        assert proc.returncode in (0, 1), err(proc)
        rows = _rows(out_file)
        checks = [r for r in rows if r["type"] == "check"]
        assert len(checks) == questions and {r["check"] for r in checks} == {"recall@1"}
        assert len([r for r in rows if r["type"] == "summary"]) == questions
        if kind == "locomo":
            # Each question names its evidence session's words: the first hit is that session.
            assert all(r["passed"] for r in checks[:3]), [r["detail"] for r in checks]
            assert proc.returncode == (0 if all(r["passed"] for r in checks) else 1)
        else:
            bike = next(r for r in checks if r["scenario"] == "longmemeval/lme-bike-colour")
            assert bike["passed"] and "ranked s-bicycle" in bike["detail"]
            gym = next(r for r in checks if r["scenario"] == "longmemeval/lme-gym-days")
            assert not gym["passed"] and "recall@1 0.50" in gym["detail"]  # two evidence sessions, k = 1
            assert (bike["score"], gym["score"]) == (1.0, 0.5)
            # The benchmark's number under the table: the mean recall@k over the questions.
            assert "\nrecall@1: 1/2 passed, mean 0.75\n" in out(proc)


def test_retrieval_only_at_a_larger_k_finds_every_evidence_session(tmp_path: Path) -> None:
    histories = benchmarks.longmemeval(LME)
    results = list(benchmarks.retrieval("longmemeval", histories, k=3, db_url=None))
    gym = next(r for r in results if r.scenario.endswith("lme-gym-days"))
    assert gym.checks[0].passed, gym.checks[0].detail


def test_questions_are_answered_in_new_threads_and_scored(tmp_path: Path) -> None:
    judge = ScriptedModel("judge")
    for _ in range(10):
        judge.enqueue_text("yes")
    results = list(benchmarks.answer_questions("locomo", benchmarks.locomo(LOCOMO), OracleModel(), db_url=None,
                                               judge=judge))
    assert [r.scenario for r in results] == [f"locomo/conv-small-q{n}" for n in (1, 2, 3, 4)]
    first = {c.check: c for c in results[0].checks}
    assert set(first) == {"exact_match", "contains", "token_f1", "judge"}
    # The oracle searched the replayed conversations and quoted the evidence line.
    assert first["contains"].passed and first["judge"].passed
    assert "A blue vase" in judge.requests[0]["messages"][0]["content"][0]["text"]
    lisbon = {c.check: c for c in results[1].checks}
    assert lisbon["contains"].passed
    assert all(r.requests > 0 and r.tokens > 0 for r in results)


def test_a_model_that_ignores_memory_scores_nothing() -> None:
    results = list(benchmarks.answer_questions("longmemeval", benchmarks.longmemeval(LME),
                                               OracleModel(uses_memory=False), db_url=None))
    assert results and not any(c.passed for r in results for c in r.checks if c.check == "contains")
    # A failure line says what was answered beside the gold (no need to open the JSONL).
    bike = {c.check: c for c in results[0].checks}
    assert bike["exact_match"].detail.startswith("gold 'green', answered 'What colour is the bicycle")
    assert bike["token_f1"].detail.startswith("F1 ") and "answered '" in bike["token_f1"].detail


def test_reflect_runs_over_the_history_first() -> None:
    model = OracleModel()
    results = list(benchmarks.answer_questions("longmemeval", benchmarks.longmemeval(LME)[:1], model,
                                               db_url=None, use_reflect=True))
    assert len(results) == 1 and results[0].error is None
    assert model.calls > results[0].requests  # the reflection's requests came first


def test_a_benchmark_runs_through_the_cli_with_a_judge(tmp_path: Path, chat_env: None) -> None:
    from bench.fake_messages_api import FakeMessagesAPI
    from tests.test_eval import _oracle_answer

    out_file = tmp_path / "locomo.jsonl"
    with FakeMessagesAPI() as api:
        answer = _oracle_answer(OracleModel())
        for _ in range(60):
            api.enqueue_callable(answer)
        proc = run("eval", "--locomo", str(LOCOMO), "--model", "claude-sonnet-5-5", "--judge", "claude-haiku-5-5",
                   "--out", str(out_file), env={"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "k"},
                   timeout=120)
        judged = [r for r in api.requests if "strict grader" in json.dumps(r.get("system"))]
    assert proc.returncode in (0, 1), err(proc)
    rows = _rows(out_file)
    checks = [r for r in rows if r["type"] == "check"]
    assert {r["check"] for r in checks} == {"exact_match", "contains", "token_f1", "judge"}
    assert len(judged) == 4 and {r["model"] for r in judged} == {"claude-haiku-5-5"}
    first = {r["check"]: r for r in checks if r["scenario"] == "locomo/conv-small-q1"}
    assert first["judge"]["passed"] and first["contains"]["passed"]
    assert "locomo/conv-small-q1" in out(proc)
    f1 = [r["score"] for r in checks if r["check"] == "token_f1"]
    assert len(f1) == 4 and all(isinstance(v, float) for v in f1)
    passed = sum(r["passed"] for r in checks if r["check"] == "token_f1")
    assert f"\ntoken_f1: {passed}/4 passed, mean {sum(f1) / 4:.2f}\n" in out(proc)
    assert "\njudge: " in out(proc) and "\nexact_match: " in out(proc)


def test_a_judge_whose_key_is_rejected_stops_the_run_with_exit_2(tmp_path: Path, chat_env: None) -> None:
    from bench.fake_messages_api import FakeMessagesAPI
    from bench.fake_openai_api import FakeOpenAIAPI
    from tests.test_eval import _oracle_answer

    with FakeMessagesAPI() as api, FakeOpenAIAPI(require_key="right") as judge:
        answer = _oracle_answer(OracleModel())
        for _ in range(20):
            api.enqueue_callable(answer)
        proc = run("eval", "--locomo", str(LOCOMO), "--model", "claude-sonnet-5-5", "--judge", "openai/gpt-5.1",
                   env={"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "k",
                        "OPENAI_BASE_URL": judge.base_url, "OPENAI_API_KEY": "wrong"}, timeout=120)
    assert proc.returncode == 2, (out(proc), err(proc))
    assert err(proc).startswith("memagent: --judge: the model cannot be used: ") and "401" in err(proc)
    assert err(proc).count("\n") == 1 and "Traceback" not in err(proc)
