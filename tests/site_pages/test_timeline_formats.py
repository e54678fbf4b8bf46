"""Timelines for tickets: ``timeline RUN --format html|md|json`` (or from the --out suffix)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from command_line import invoke, run_cli
from site_helpers import BASE_TIME, SAMPLE, failure_text, read_jsonl, step, tool, write_jsonl

from nrllm_report.core.options import BuildOptions
from nrllm_report.core.schema import CANONICAL_SCHEMA, TIMELINE_COLUMNS
from nrllm_report.pipeline import timeline as timeline_function
from nrllm_report.site.markdown import MARKDOWN_LIMIT
from nrllm_report.site.timeline_formats import NAMES_OF, OWN_COLUMNS, detail_columns

SAMPLE_RUN = "e213df5a-ba80-4e0d-aeea-5bed705ef4e3"  # 29 steps, with content: ok, cancelled and local calls
SAMPLE_RUN_STEPS = 29


def timeline(*args: Any) -> Result:
    return invoke("timeline", *args)


def timeline_ok(*args: Any) -> Result:
    result = timeline(*args)
    assert result.exit_code == 0, failure_text(result)
    return result


def table_lines(markdown: str) -> list[str]:
    """The steps table's body rows (the lines after the |---| separator)."""
    lines = markdown.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("|---|"))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("| "):
            break
        body.append(line)
    return body


def cells_of(line: str) -> list[str]:
    """A Markdown table row split at its unescaped pipes, as GitHub reads it."""
    cells, current, escaped = [], "", False
    for character in line.strip()[1:-1]:
        if escaped:
            current += character
            escaped = False
        elif character == "\\":
            current += character
            escaped = True
        elif character == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += character
    cells.append(current.strip())
    return cells


def hostile_run(path: Path) -> Path:
    """A run whose tool names, server and run id carry Markdown's specials, and an approval."""
    run = "r|`7`*<b>"
    return write_jsonl(path, [
        step(run, 0, "llm", crdate=BASE_TIME),
        tool(run, 1, "mcp_evil|srv_do`it`|x", False, "ok", crdate=BASE_TIME + 1, server="evil|srv"),
        tool(run, 2, "local_[link](http://x)_@all", True, "cancelled", crdate=BASE_TIME + 2),
        step(run, 3, "approval", crdate=BASE_TIME + 3, payload={"approved": False, "decidedBy": 4711}),
    ])


@pytest.mark.parametrize(("suffix", "expected"), [(".html", "html"), (".md", "md"), (".json", "json"),
                                                  (".txt", "html")])
def test_the_format_follows_the_out_suffix(tmp_path: Path, suffix: str, expected: str) -> None:
    out = tmp_path / f"timeline{suffix}"
    timeline_ok(SAMPLE_RUN, "--out", out)
    text = out.read_text(encoding="utf-8")
    kind = "html" if text.startswith("<!DOCTYPE") else "json" if text.startswith("{") else "md"
    assert kind == expected


def test_format_wins_over_the_suffix(tmp_path: Path) -> None:
    out = tmp_path / "timeline.html"
    timeline_ok(SAMPLE_RUN, "--out", out, "--format", "md")
    assert out.read_text(encoding="utf-8").startswith("## Timeline of run")


def test_an_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    result = timeline(SAMPLE_RUN, "--out", tmp_path / "t.md", "--format", "pdf")
    assert result.exit_code == 2
    assert "'pdf'" in result.output


@pytest.mark.parametrize(("language", "heading", "words"), [
    ("en", "## Timeline of run", {"ok", "cancelled"}),
    ("de", "## Verlauf des Laufs", {"ok", "abgebrochen"}),
])
def test_markdown_has_the_facts_and_one_row_per_step(
    tmp_path: Path, language: str, heading: str, words: set[str]
) -> None:
    out = tmp_path / "timeline.md"
    timeline_ok(SAMPLE_RUN, "--out", out, "--lang", language)
    text = out.read_text(encoding="utf-8")
    assert text.startswith(f"{heading} {SAMPLE_RUN.replace('-', chr(92) + '-')}")
    rows = [cells_of(line) for line in table_lines(text)]
    assert all(len(row) == 10 for row in rows)  # Source first: the sample's provider calls are merged in
    steps = [row[1:] for row in rows if row[0] == rows[0][0]]  # the first row is a step
    assert len(steps) == SAMPLE_RUN_STEPS and len(rows) > len(steps)
    assert [row[0] for row in steps] == [str(sequence) for sequence in range(SAMPLE_RUN_STEPS)]
    outcomes = {row[7] for row in steps} - {"–"}
    assert outcomes == words


def test_markdown_escapes_every_special_of_the_data(tmp_path: Path) -> None:
    source = hostile_run(tmp_path / "hostile.jsonl")
    out = tmp_path / "t.md"
    timeline_ok("r|`7`*<b>", source, "--out", out)
    text = out.read_text(encoding="utf-8")
    rows = [cells_of(line) for line in table_lines(text)]
    assert len(rows) == 4 and all(len(row) == 9 for row in rows)
    assert rows[1][5] == r"mcp\_evil\|srv\_do\`it\`\|x"
    assert rows[1][6] == r"evil\|srv"
    assert rows[2][5] == r"local\_\[link\]\(http\:\/\/x\)\_\@all"
    assert "`" not in text.replace("\\`", "")
    assert "<b>" not in text
    assert text.splitlines()[0] == r"## Timeline of run r\|\`7\`\*\<b\>"


def test_markdown_shows_an_approval_but_not_who_decided_unless_asked(tmp_path: Path) -> None:
    source = hostile_run(tmp_path / "hostile.jsonl")
    plain, shown = tmp_path / "plain.md", tmp_path / "shown.md"
    options = BuildOptions(languages=("en",))
    timeline_function("r|`7`*<b>", [str(source)], out=plain, language="en", options=options,
                      output_format="md")
    timeline_function("r|`7`*<b>", [str(source)], out=shown, language="en",
                      options=replace(options, show_approvers=True), output_format="md")
    assert "Approved no" in plain.read_text(encoding="utf-8")
    assert "4711" not in plain.read_text(encoding="utf-8") and "Decided by" not in plain.read_text(encoding="utf-8")
    assert "Decided by 4711" in shown.read_text(encoding="utf-8")


def test_markdown_details_come_from_the_schema() -> None:
    assert set(OWN_COLUMNS) <= set(TIMELINE_COLUMNS)
    names = set(NAMES_OF.values())  # shown with the count they go with
    assert set(detail_columns(True)) == {column for column in TIMELINE_COLUMNS if column not in {*OWN_COLUMNS, *names}}
    assert "decidedBy" not in detail_columns(False)


def test_a_long_run_stays_under_the_markdown_limit_and_says_what_was_left_out(tmp_path: Path) -> None:
    run = "long"
    name = "mcp_" + "x" * 60
    rows = [tool(run, sequence, name, False, "ok", crdate=BASE_TIME + sequence) for sequence in range(3000)]
    source = write_jsonl(tmp_path / "long.jsonl", rows)
    out = tmp_path / "long.md"
    timeline_ok(run, source, "--out", out)
    data = out.read_bytes()
    assert len(data) < MARKDOWN_LIMIT
    shown = len(table_lines(data.decode("utf-8")))
    assert 100 < shown < 3000
    assert f"{3000 - shown:,} more steps are not shown." in data.decode("utf-8")


def test_json_holds_the_canonical_steps_in_sequence_order(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    timeline_ok(SAMPLE_RUN, "--out", out)
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["run"] == SAMPLE_RUN
    steps = document["steps"]
    assert [record["sequence"] for record in steps] == list(range(SAMPLE_RUN_STEPS))
    assert list(steps[0]) == [name for name in CANONICAL_SCHEMA.names if name != "decidedBy"]
    assert all(record["run"] == SAMPLE_RUN for record in steps)
    expected = [row for row in read_jsonl(SAMPLE) if str(row["run"]) == SAMPLE_RUN]
    assert len(expected) == SAMPLE_RUN_STEPS
    tool_steps = [record for record in steps if record["kind"] == "tool"]
    assert document["toolCalls"] == len(tool_steps)
    assert document["outcomes"] == {
        outcome: sum(1 for record in tool_steps if record["outcome"] == outcome)
        for outcome in ("ok", "failed", "cancelled")
    }


def test_json_keeps_who_decided_out_unless_asked(tmp_path: Path) -> None:
    source = hostile_run(tmp_path / "hostile.jsonl")
    plain, shown = tmp_path / "plain.json", tmp_path / "shown.json"
    options = BuildOptions(languages=("en",))
    timeline_function("r|`7`*<b>", [str(source)], out=plain, language="en", options=options,
                      output_format="json")
    timeline_function("r|`7`*<b>", [str(source)], out=shown, language="en",
                      options=replace(options, show_approvers=True), output_format="json")
    assert all("decidedBy" not in record for record in json.loads(plain.read_text())["steps"])
    assert json.loads(shown.read_text())["steps"][3]["decidedBy"] == 4711


@pytest.mark.parametrize("output_format", ["html", "md", "json"])
def test_each_format_as_a_real_command(tmp_path: Path, output_format: str) -> None:
    out = tmp_path / "attachment.out"
    completed = run_cli("timeline", SAMPLE_RUN, "--out", out, "--format", output_format, "--lang", "de", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    text = out.read_text(encoding="utf-8")
    if output_format == "json":
        assert len(json.loads(text)["steps"]) == SAMPLE_RUN_STEPS
    elif output_format == "md":
        lines = table_lines(text)
        assert sum(line.startswith("| Schritt |") for line in lines) == SAMPLE_RUN_STEPS and "abgebrochen" in text
    else:
        assert text.startswith("<!DOCTYPE html>")
