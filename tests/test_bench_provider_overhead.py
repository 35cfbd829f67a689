"""``python -m bench providers`` runs end to end on a few turns (issue 24).

Not a timing test: it checks that the benchmark still drives both providers through
their fake servers and that every answer came back as the same Anthropic-shaped
blocks (the benchmark stops with a message otherwise), and that it writes only its
own section of the results file.
"""

from __future__ import annotations

from pathlib import Path

from bench import provider_overhead


def test_both_providers_answer_the_same_turn_and_the_section_is_written(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# results\n\nother text\n", "utf-8")
    assert provider_overhead.main(["--turns", "2", "--reps", "3", "--out", str(out)]) == 0
    text = out.read_text("utf-8")
    assert text.startswith("# results\n\nother text\n")
    assert "<!-- provider_overhead:begin -->" in text and "<!-- provider_overhead:end -->" in text
    for route in ("Anthropic provider -> fake Messages API, streamed",
                  "OpenAI-compatible provider -> fake Chat Completions, streamed",
                  "OpenAI-compatible provider -> fake Chat Completions, not streamed",
                  "memagent, OpenAI: request translated (messages + tools)"):
        assert f"| {route} |" in text


def test_the_translated_answer_is_the_scripted_one() -> None:
    from memagent.agent.model.providers.openai_compat import from_chat_completion

    completion = {"choices": [{"finish_reason": "tool_calls", "message": {
        "content": provider_overhead.ANSWER_TEXT,
        "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "edit_file", "arguments": '{"file_path": "/AGENTS.md", "old_string": "- Answer directly '
                                              'first, then give detail if it helps.", "new_string": "x"}'}}]}}]}
    # A different edit is not the scripted answer: the benchmark's check would stop the run.
    assert not provider_overhead.expected_content(from_chat_completion(completion, "m"))
