"""What a default installation records (nr-llm's allow-list of step
facts, at the "metadata" privacy level or derived from the content at "full"), and who
approved is not published unless asked for."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from command_line import invoke
from conftest import check_one, rules_of, step_row, tool_payload, tool_row
from safety_helpers import generator
from site_helpers import REPO, build_ok, failure_text, page, read_jsonl, table_rows, write_jsonl

metadata_only = generator().metadata_only  # nr-llm's RunStepPrivacyFilter at "metadata", ported

FACT_NAMES = (
    "messageCount", "requestedToolCallCount", "requestedToolNames", "toolSpecCount", "toolSpecs", "artifactCount",
    "toolArtifactTypes", "contentLength", "thinkingLength", "toolResultLength", "contentRedacted",
    "droppedSourceCount", "droppedSources",
)


def facts_of(row: dict[str, Any]) -> dict[str, Any]:
    result = check_one(row)
    assert result.step is not None, result.problems
    record = result.step.to_record()
    return {name: record[name] for name in FACT_NAMES if record[name] is not None}



# ---------------------------------------------------------------- the canonical fields


METADATA_ROWS = [
    pytest.param(
        step_row("request", payload={"messagesSentCount": 3, "toolSpecs": ["kb_lookup", "mcp_github_list"],
                                     "contentRedacted": True}),
        {"messageCount": 3, "toolSpecCount": 2, "toolSpecs": ["kb_lookup", "mcp_github_list"], "contentRedacted": True},
        id="request",
    ),
    pytest.param(
        step_row("llm", payload={"finishReason": "tool_calls", "contentLength": 12, "thinkingLength": 40,
                                 "requestedToolNames": ["kb_lookup", "kb_lookup"], "contentRedacted": True}),
        {"requestedToolCallCount": 2, "requestedToolNames": ["kb_lookup", "kb_lookup"], "contentLength": 12,
         "thinkingLength": 40, "contentRedacted": True},
        id="llm",
    ),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=False, toolOutcome="ok", toolResultLength=87, toolArtifactsCount=2,
                                      toolArtifactTypes=["text", "table"], contentRedacted=True)),
        {"toolResultLength": 87, "artifactCount": 2, "toolArtifactTypes": ["text", "table"], "contentRedacted": True},
        id="tool",
    ),
    pytest.param(
        step_row("dropped", payload={"droppedSources": ["snippet#41 deactivated", "tool#3 stale"]}),
        {"droppedSourceCount": 2, "droppedSources": ["snippet#41 deactivated", "tool#3 stale"]},
        id="dropped",
    ),
]


@pytest.mark.parametrize(("row", "facts"), METADATA_ROWS)
def test_the_metadata_keys_become_the_canonical_fields(row: dict[str, Any], facts: dict[str, Any]) -> None:
    assert facts_of(row) == facts


FULL_PAYLOADS = [
    pytest.param("request", {"messagesSent": [{"role": "user", "content": "SECRET"}] * 3, "toolSpecs": ["a", "b"]},
                 id="messages"),
    pytest.param("llm", {"content": "Grüße 😀 aus Köln", "thinking": "", "finishReason": "stop",
                         "requestedToolCalls": [{"id": "c1", "name": "kb_lookup", "arguments": {"q": "SECRET"}},
                                                {"id": "c2", "name": "mcp_github_list", "arguments": "{}"}]},
                 id="characters-not-bytes"),
    pytest.param("tool", {"toolName": "mcp_docs_fetch", "toolIsError": False, "toolResult": "naïve résumé ✓",
                          "toolArtifacts": [{"type": "text", "label": "page", "data": "SECRET"},
                                            {"type": "image", "data": "SECRET"}]},
                 id="artifacts"),
    pytest.param("llm", {"requestedToolCalls": [{"id": "c1", "name": "kb_lookup"}, {"id": "c2"}, "odd"],
                         "content": {"parts": ["SECRET"]}},
                 id="calls-without-a-name-and-content-not-a-string"),
]


@pytest.mark.parametrize(("kind", "payload"), FULL_PAYLOADS)
def test_content_gives_the_facts_nr_llms_privacy_filter_would_have_stored(kind: str, payload: dict[str, Any]) -> None:
    """The same step exported at "full" and at "metadata" gives the same facts, contentRedacted aside."""
    full = facts_of(step_row(kind, payload=payload))
    stored = facts_of(step_row(kind, payload=metadata_only(payload)))
    assert stored.pop("contentRedacted") is True
    if kind == "llm" and "requestedToolCalls" in payload:
        # nr-llm stores only the names it could read; a call without one is counted in the export, not named
        full["requestedToolCallCount"] = len(full["requestedToolNames"])
    assert full == stored
    assert "SECRET" not in json.dumps(full)


def test_a_length_counts_characters_as_mb_strlen_does() -> None:
    assert facts_of(step_row("llm", payload={"content": "Grüße 😀"}))["contentLength"] == 7
    assert len("Grüße 😀".encode()) == 12


def test_the_metadata_key_is_read_before_the_content() -> None:
    row = step_row("request", payload={"messagesSentCount": 5, "messagesSent": [{"role": "user"}]})
    assert facts_of(row)["messageCount"] == 5


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        pytest.param({"contentLength": "12"}, "contentLength", id="length-as-string"),
        pytest.param({"thinkingLength": -1}, "thinkingLength", id="negative-length"),
        pytest.param({"toolResultLength": 1.5}, "toolResultLength", id="fractional-length"),
        pytest.param({"messagesSentCount": True}, "messagesSentCount", id="count-as-boolean"),
        pytest.param({"toolArtifactsCount": "2"}, "toolArtifactsCount", id="artifact-count-as-string"),
        pytest.param({"requestedToolNames": "kb_lookup"}, "requestedToolNames", id="names-not-a-list"),
        pytest.param({"requestedToolNames": ["kb_lookup", 7]}, "requestedToolNames", id="a-name-not-a-string"),
        pytest.param({"toolArtifactTypes": [None]}, "toolArtifactTypes", id="a-null-type"),
        pytest.param({"toolSpecs": [{"description": "no name"}]}, "toolSpecs", id="a-spec-without-a-name"),
        pytest.param({"droppedSources": "snippet#41 deactivated"}, "droppedSources", id="sources-not-a-list"),
        pytest.param({"contentRedacted": "true"}, "contentRedacted", id="redacted-as-string"),
        pytest.param({"requestedToolCalls": {"id": "c1"}}, "requestedToolCalls", id="calls-not-a-list"),
    ],
)
def test_an_allow_listed_key_of_the_wrong_type_is_bad_type(payload: dict[str, Any], field: str) -> None:
    result = check_one(step_row("llm", payload=payload))
    assert rules_of(result) == ["bad-type"]
    assert result.problems[0].text().startswith(f"{field} must be ")


def test_a_list_in_a_message_is_named_by_its_type_never_quoted() -> None:
    result = check_one(step_row("dropped", payload={"droppedSources": "snippet#41 SECRET reason"}))
    assert "SECRET" not in result.problems[0].text()


# ---------------------------------------------------------------- pages


def one_run_of_every_fact() -> list[dict[str, Any]]:
    start = 1_788_000_000
    payloads = [
        ("request", {"messagesSentCount": 2, "toolSpecs": ["kb_lookup", "mcp_github_list"], "contentRedacted": True}),
        ("llm", {"finishReason": "tool_calls", "promptTokens": 900, "contentLength": 1234, "thinkingLength": 1,
                 "requestedToolNames": ["kb_lookup", "mcp_github_list"], "contentRedacted": True}),
        ("approval", {"approved": False, "decidedBy": 4242, "contentRedacted": True}),
        ("tool", {"toolName": "mcp_github_list", "toolIsError": True, "toolOutcome": "failed",
                  "toolResultLength": 0, "toolArtifactsCount": 1, "toolArtifactTypes": ["text"]}),
        ("dropped", {"droppedSources": ["snippet#41 deactivated", "tool#3 stale"]}),
        ("approval", {"approved": True, "decidedBy": 4243}),
    ]
    return [{"run": "facts", "sequence": index, "kind": kind, "round": 1, "crdate": start + index, "payload": payload}
            for index, (kind, payload) in enumerate(payloads)]


def details(document: Any) -> list[str]:
    """Each timeline row's facts as a reader sees them, one after the other."""
    return [" ".join(fact.text() for fact in row.find("td", "details").find_all("span", "fact"))
            for row in table_rows(document, "timeline")]


EXPECTED_DETAILS = {
    "en": [
        "Messages sent 2 Tool specs 2: kb_lookup, mcp_github_list Content redacted yes",
        "Finish reason tool_calls Prompt tokens 900 Requested tool calls 2: kb_lookup, mcp_github_list "
        "Content length 1,234 characters Thinking length 1 character Content redacted yes",
        "Content redacted yes Approved no",
        "Artifacts 1: text Tool result length 0 characters",
        "Dropped sources 2: snippet#41 deactivated, tool#3 stale",
        "Approved yes",
    ],
    "de": [
        "Gesendete Nachrichten 2 Werkzeugspezifikationen 2: kb_lookup, mcp_github_list Inhalt entfernt ja",
        "Abschlussgrund tool_calls Prompt-Tokens 900 Angeforderte Werkzeugaufrufe 2: kb_lookup, mcp_github_list "
        "Länge des Inhalts 1.234 Zeichen Länge der Denkschritte 1 Zeichen Inhalt entfernt ja",
        "Inhalt entfernt ja Freigegeben nein",
        "Artefakte 1: text Länge des Werkzeugergebnisses 0 Zeichen",
        "Verworfene Quellen 2: snippet#41 deactivated, tool#3 stale",
        "Freigegeben ja",
    ],
}


@pytest.fixture(scope="module")
def facts_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("facts") / "facts.jsonl", one_run_of_every_fact())


@pytest.mark.parametrize("language", ["en", "de"])
def test_run_pages_and_the_single_file_timeline_show_the_allow_list(
    facts_input: Path, tmp_path: Path, language: str
) -> None:
    build_ok(facts_input, "--out", tmp_path / "site", "--lang", language)
    assert details(page(tmp_path / "site" / language / "runs" / "facts.html")) == EXPECTED_DETAILS[language]
    result = invoke("timeline", "facts", facts_input, "--out", tmp_path / "facts.html", "--lang", language)
    assert result.exit_code == 0, failure_text(result)
    assert details(page(tmp_path / "facts.html")) == EXPECTED_DETAILS[language]


def test_the_german_labels_say_what_the_german_backend_says(facts_input: Path, tmp_path: Path) -> None:
    """'Freigabe' is nr-llm's German word for approval: 'Freigegeben' says a step was approved."""
    build_ok(facts_input, "--out", tmp_path / "site", "--lang", "de")
    text = (tmp_path / "site" / "de" / "runs" / "facts.html").read_text(encoding="utf-8")
    assert "Freigegeben" in text and "Approved" not in text


def full_and_metadata(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "payload": json.dumps(metadata_only(json.loads(row["payload"])))} for row in rows]


REDACTED_FACT = re.compile(r'<span class="fact"><span class="fact-label">(Content redacted|Inhalt entfernt)</span> '
                           r"[^<]*</span>")


@pytest.mark.slow
def test_the_same_run_at_full_and_at_metadata_renders_the_same_timeline(tmp_path: Path) -> None:
    full = [row for row in read_jsonl(REPO / "sample_data" / "runs.jsonl") if '"contentRedacted"' not in row["payload"]]
    assert len({row["run"] for row in full}) >= 10, "the sample has runs stored at the full level"
    sources = {"full": write_jsonl(tmp_path / "full.jsonl", full),
               "metadata": write_jsonl(tmp_path / "metadata.jsonl", full_and_metadata(full))}
    for name, source in sources.items():
        build_ok(source, "--out", tmp_path / name, "--servers", "jira_cloud,crm_eu_west")
    pages = sorted((tmp_path / "full").glob("*/runs/*.html"))
    assert len(pages) == 2 * len({row["run"] for row in full})
    for full_page in pages:
        metadata_page = tmp_path / "metadata" / full_page.relative_to(tmp_path / "full")
        shown = REDACTED_FACT.sub("", metadata_page.read_text(encoding="utf-8"))
        assert shown == full_page.read_text(encoding="utf-8"), full_page.name


def test_the_bundled_sample_has_rows_at_the_default_privacy_level(tmp_path: Path) -> None:
    """The README's first command builds the sample: some of its runs were stored at "metadata"."""
    rows = read_jsonl(REPO / "sample_data" / "runs.jsonl")
    stored = [json.loads(row["payload"]) for row in rows]
    assert sum(1 for payload in stored if payload.get("contentRedacted")) > 100
    assert not any(set(payload) & {"messagesSent", "content", "toolResult"} for payload in stored
                   if payload.get("contentRedacted"))
    build_ok("--out", tmp_path / "site")
    shown = " ".join(path.read_text(encoding="utf-8") for path in (tmp_path / "site" / "en" / "runs").glob("*.html"))
    for label in ("Content redacted", "Tool result length", "Requested tool calls", "Artifacts", "Tool specs"):
        assert f'<span class="fact-label">{label}</span>' in shown


def test_names_holding_separators_or_markup_are_shown_as_they_are(tmp_path: Path) -> None:
    names = ["a\x1eb", "c\x1fd", "back\\slash", "<b>bold</b>", ""]
    row = {"run": "odd", "sequence": 0, "kind": "request", "crdate": 1_788_000_000, "payload": {"toolSpecs": names}}
    build_ok(write_jsonl(tmp_path / "odd.jsonl", [row]), "--out", tmp_path / "site", "--lang", "en")
    shown = (tmp_path / "site" / "en" / "runs" / "odd.html").read_text(encoding="utf-8")
    codes = ", ".join(f"<code>{html.escape(name, quote=True).replace('&#x27;', '&#39;')}</code>" for name in names)
    assert f'<span class="fact fact-list"><span class="fact-label">Tool specs</span> 5: {codes}</span>' in shown
    assert "<b>bold</b>" not in shown


# ---------------------------------------------------------------- who approved


def test_pages_do_not_show_who_decided_unless_asked(facts_input: Path, tmp_path: Path) -> None:
    build_ok(facts_input, "--out", tmp_path / "default")
    build_ok(facts_input, "--out", tmp_path / "shown", "--show-approvers")
    for language, label in (("en", "Decided by"), ("de", "Entschieden von")):
        default = (tmp_path / "default" / language / "runs" / "facts.html").read_text(encoding="utf-8")
        shown = (tmp_path / "shown" / language / "runs" / "facts.html").read_text(encoding="utf-8")
        assert "4242" not in default and label not in default
        # A backend user's id, as the id it is: never grouped like a quantity.
        assert f'<span class="fact-label">{label}</span> 4242</span>' in shown
        assert "4,242" not in shown and "4.242" not in shown
    everything = "".join(path.read_text(encoding="utf-8") for path in (tmp_path / "default").rglob("*.html"))
    assert "4242" not in everything and "4,242" not in everything and "4.242" not in everything


def test_the_single_file_timeline_does_not_show_who_decided_unless_asked(facts_input: Path, tmp_path: Path) -> None:
    for args, shown in (((), False), (("--show-approvers",), True)):
        out = tmp_path / f"timeline-{shown}.html"
        result = invoke("timeline", "facts", facts_input, "--out", out, *args)
        assert result.exit_code == 0, failure_text(result)
        assert ("4242" in out.read_text(encoding="utf-8")) is shown


def test_canonical_records_keep_who_decided(facts_input: Path, tmp_path: Path) -> None:
    result = invoke("normalize", facts_input, "--out", tmp_path / "records.jsonl")
    assert result.exit_code == 0, failure_text(result)
    assert [record["decidedBy"] for record in read_jsonl(tmp_path / "records.jsonl") if record["kind"] == "approval"] \
        == [4242, 4243]


def test_who_decided_is_part_of_a_run_pages_key(facts_input: Path, tmp_path: Path) -> None:
    """A rebuild with --show-approvers renders the run pages again instead of reusing them."""
    build_ok(facts_input, "--out", tmp_path / "site")
    build_ok(facts_input, "--out", tmp_path / "site", "--show-approvers")
    assert "4242" in (tmp_path / "site" / "en" / "runs" / "facts.html").read_text(encoding="utf-8")


EXPECTED_MARKDOWN = [
    "Messages sent 2; Tool specs 2: kb\\_lookup, mcp\\_github\\_list; Content redacted yes",
    "Finish reason tool\\_calls; Prompt tokens 900; Requested tool calls 2: kb\\_lookup, mcp\\_github\\_list; "
    "Content length 1,234 characters; Thinking length 1 character; Content redacted yes",
    "Content redacted yes; Approved no",
    "Artifacts 1: text; Tool result length 0 characters",
    "Dropped sources 2: snippet\\#41 deactivated, tool\\#3 stale",
    "Approved yes",
]


def test_the_markdown_and_json_timelines_carry_the_allow_list(facts_input: Path, tmp_path: Path) -> None:
    for args, shown in (((), False), (("--show-approvers",), True)):
        markdown, records = tmp_path / f"facts-{shown}.md", tmp_path / f"facts-{shown}.json"
        for out in (markdown, records):
            result = invoke("timeline", "facts", facts_input, "--out", out, *args)
            assert result.exit_code == 0, failure_text(result)
        rows = [line.split(" | ")[-1].rstrip(" |") for line in markdown.read_text(encoding="utf-8").splitlines()
                if line.startswith("| ") and line[2].isdigit()]
        decided = {2: "; Decided by 4242", 5: "; Decided by 4243"} if shown else {}
        assert rows == [line + decided.get(index, "") for index, line in enumerate(EXPECTED_MARKDOWN)]
        steps = json.loads(records.read_text(encoding="utf-8"))["steps"]
        assert steps[1]["requestedToolNames"] == ["kb_lookup", "mcp_github_list"]
        assert steps[3]["toolArtifactTypes"] == ["text"] and steps[4]["droppedSources"][0] == "snippet#41 deactivated"
        assert ("decidedBy" in steps[2]) is shown
        assert ("4242" in markdown.read_text(encoding="utf-8")) is shown
