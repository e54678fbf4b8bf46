"""Truer server figures: a failed call that an operator's denial or a governance
``tool_denied`` decision explains is denied. Its outcome string stays ``failed`` (ADR-191); it
is counted as ``denied`` and never in a server's failure rate. With the MCP catalogue, a
tool's server is the catalogue's, and orphaned tools are marked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command_line import run_cli
from site_helpers import cells, norm, page, table_rows

from nrllm_report import pipeline
from nrllm_report.aggregate.denials import denials, with_catalogue_servers, with_server_truths
from nrllm_report.aggregate.figures import SiteFigures
from nrllm_report.core.options import BuildOptions
from nrllm_report.core.schema import CHECKED_SCHEMA, DENIAL_COLUMN
from nrllm_report.core.tables import NO_TRUTHS, Denial, ServerTruths

BASE = 1_788_000_000
RUN = 4711  # as the table names a run: its uid


def event(sequence: int, kind: str, payload: dict[str, Any], duration_ms: float = 0.0, run: int = RUN,
          crdate: int | None = None) -> dict[str, Any]:
    """A row of tx_nrllm_agentrun_event as a SQL client dumps it: the payload as JSON text."""
    return {"uid": run * 100 + sequence, "run": run, "sequence": sequence, "kind": kind, "round": 1,
            "duration_ms": f"{duration_ms:.2f}", "payload": json.dumps(payload),
            "crdate": BASE + sequence if crdate is None else crdate}


def approval(sequence: int, approved: bool, run: int = RUN) -> dict[str, Any]:
    return event(sequence, "approval", {"approved": approved, "decidedBy": 7}, run=run)


def call(sequence: int, tool: str, outcome: str, duration_ms: float = 0.0, run: int = RUN,
         crdate: int | None = None) -> dict[str, Any]:
    return event(sequence, "tool", {"toolName": tool, "toolIsError": outcome != "ok", "toolOutcome": outcome},
                 duration_ms, run, crdate)


def write_events(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# The operator denied the first call: written at resume as failed in 0 ms right after the approval.
# Then a call that failed in 0 ms with no denial before it, a denied approval followed by a call
# that really ran and failed, and the server's own successes.
EVENTS = [
    event(0, "llm", {"finishReason": "tool_calls"}, 812.0),
    approval(1, False),
    call(2, "mcp_github_create_issue", "failed", 0.0),
    call(3, "mcp_github_list", "failed", 0.0),
    approval(4, False),
    call(5, "mcp_github_list", "failed", 950.0),
    call(6, "mcp_github_list", "ok", 300.0),
    approval(7, True),
    call(8, "mcp_github_create_issue", "ok", 410.0),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The events-only export built through the command line, in a real process."""
    folder = tmp_path_factory.mktemp("denied")
    source = write_events(folder / "tx_nrllm_agentrun_event.jsonl", EVENTS)
    completed = run_cli("build", source, "--out", folder / "site", "--timings", "--jobs", "1", "--no-cache")
    assert completed.returncode == 0, completed.stderr
    timings = json.loads(completed.stderr.strip().splitlines()[-1])
    assert timings["fast path rows"] == len(EVENTS), "the rows must take the Arrow fast path"
    return folder / "site", json.loads((folder / "site" / "summary.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- summary.json, from the events alone


def test_an_operators_denial_is_denied_not_failed_and_never_in_the_failure_rate(built: tuple[Path, Any]) -> None:
    _site, summary = built
    github = summary["servers"]["github"]
    assert (github["ok"], github["failed"], github["cancelled"], github["denied"]) == (2, 2, 0, 1)
    assert github["failure_rate"] == 2 / 4, "the denied call is in neither side of the rate"
    assert github["failed_in_0ms"] == 1, "only the 0 ms failure nothing explains"
    assert summary["outcomes"] == {"ok": 2, "failed": 2, "cancelled": 0} and summary["denied"] == 1


def test_each_tool_has_its_denied_calls_in_summary_json(built: tuple[Path, Any]) -> None:
    tools = built[1]["servers"]["github"]["tools"]
    assert {name: (figures["ok"], figures["failed"], figures["denied"]) for name, figures in tools.items()} == {
        "mcp_github_create_issue": (1, 0, 1), "mcp_github_list": (1, 2, 0),
    }
    assert tools["mcp_github_create_issue"]["failure_rate"] == 0.0
    assert not any(figures["orphaned"] for figures in tools.values()), "no catalogue: nothing is orphaned"


# ---------------------------------------------------------------- the pages, in both languages

WORDS = {
    "en": {"denied": "Denied", "operator": "denied by the operator", "failed": "failed"},
    "de": {"denied": "Verweigert", "operator": "vom Operator verweigert", "failed": "fehlgeschlagen"},
}


def _run_page(site: Path, language: str) -> Any:
    return page(site / language / "runs" / f"{RUN}.html")


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_timeline_row_of_a_denied_call_says_who_denied_it(built: tuple[Path, Any], language: str) -> None:
    rows = {cells(row)[0]: row for row in _run_page(built[0], language).find_all("tr") if "kind-tool" in row.classes}
    denied = rows["2"]
    assert "step-failed" in denied.classes and "step-denied" in denied.classes
    outcome = cells(denied)[7]
    assert WORDS[language]["failed"] in outcome and WORDS[language]["operator"] in outcome
    [note] = [span for span in denied.find_all("span") if "denial" in span.classes]
    assert "denial-operator" in note.classes and norm(note.text()) == WORDS[language]["operator"]
    assert "<" not in outcome, "markup, not escaped text"
    for other in ("3", "5"):  # failed in 0 ms without a denial; a denial followed by a real failure
        assert WORDS[language]["operator"] not in cells(rows[other])[7] and "step-denied" not in rows[other].classes


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_run_page_counts_the_denied_call_apart_from_the_failed(built: tuple[Path, Any], language: str) -> None:
    facts = _run_page(built[0], language).find("dl", "facts")
    shown = {norm(term.text()): norm(value.text()) for term, value in zip(facts.find_all("dt"), facts.find_all("dd"))}
    assert shown[WORDS[language]["denied"]] == "1" and shown[WORDS[language]["failed"]] == "2"


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_server_and_tool_tables_have_a_denied_column(built: tuple[Path, Any], language: str) -> None:
    label = WORDS[language]["denied"]
    servers = page(built[0] / language / "servers" / "index.html")
    headers = [norm(cell.text()) for cell in servers.find("table", "servers").find_all("th")]
    [github] = [cells(row) for row in table_rows(servers, "servers")]
    assert github[headers.index(label)] == "1"
    server = page(built[0] / language / "servers" / "github.html")
    headers = [norm(cell.text()) for cell in server.find("table", "tools").find_all("th")]
    tools = {row[0]: row for row in map(cells, table_rows(server, "tools"))}
    assert tools["mcp_github_create_issue"][headers.index(label)] == "1"
    assert tools["mcp_github_list"][headers.index(label)] == "0"


# ---------------------------------------------------------------- the timeline command


def test_the_timeline_json_keeps_the_steps_and_lists_the_denials_beside_them(tmp_path: Path) -> None:
    source = write_events(tmp_path / "events.jsonl", EVENTS)
    out = tmp_path / "timeline.json"
    completed = run_cli("timeline", str(RUN), source, "--format", "json", "--out", out, "--no-cache")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(out.read_text(encoding="utf-8"))
    assert DENIAL_COLUMN not in document["steps"][2] and document["steps"][2]["outcome"] == "failed"
    assert document["denials"] == [{"sequence": 2, "toolName": "mcp_github_create_issue", "denial": "operator"}]
    assert document["denied"] == 1 and document["outcomes"]["failed"] == 2


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_timeline_markdown_says_it_in_the_outcome_cell(tmp_path: Path, language: str) -> None:
    source = write_events(tmp_path / "events.jsonl", EVENTS)
    out = tmp_path / "timeline.md"
    completed = run_cli("timeline", str(RUN), source, "--format", "md", "--lang", language, "--out", out,
                        "--no-cache")
    assert completed.returncode == 0, completed.stderr
    lines = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| 2 |")]
    assert len(lines) == 1 and f"{WORDS[language]['failed']} ({WORDS[language]['operator']})" in lines[0]
    assert f"- {WORDS[language]['denied']}: 1" in out.read_text(encoding="utf-8").splitlines()
    assert out.read_text(encoding="utf-8").count(WORDS[language]["operator"]) == 1


# ---------------------------------------------------------------- the rule, on a table


def steps_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Checked steps (``CHECKED_SCHEMA``) of a few made-up rows, sorted by run and sequence."""
    defaults = {field.name: None for field in CHECKED_SCHEMA}
    records = [{**defaults, "round": 1, "durationMs": 0.0, "input_index": 0, "row": index, **row}
               for index, row in enumerate(rows)]
    table = pa.Table.from_pylist(records, schema=CHECKED_SCHEMA)
    return table.sort_by([("run", "ascending"), ("sequence", "ascending")])


def tool_step(run: str, sequence: int, tool: str, outcome: str, duration_ms: float = 0.0,
              crdate: int | None = None) -> dict[str, Any]:
    return {"run": run, "sequence": sequence, "kind": "tool", "toolName": tool, "server": "github",
            "toolIsError": outcome != "ok", "outcome": outcome, "outcomeStated": True, "durationMs": duration_ms,
            "crdate": BASE + sequence if crdate is None else crdate}


def approval_step(run: str, sequence: int, approved: bool) -> dict[str, Any]:
    return {"run": run, "sequence": sequence, "kind": "approval", "approved": approved, "decidedBy": 7,
            "crdate": BASE + sequence}


def test_an_approval_of_another_run_explains_nothing() -> None:
    steps = steps_table([approval_step("a", 0, False), tool_step("b", 0, "mcp_github_x", "failed")])
    assert denials(steps).to_pylist() == [None, None]


@pytest.mark.parametrize(("outcome", "duration_ms", "expected"), [
    pytest.param("failed", 0.0, "operator", id="failed-in-0ms"),
    pytest.param("failed", 12.0, None, id="failed-with-a-duration"),
    pytest.param("cancelled", 0.0, None, id="cancelled"),
    pytest.param("ok", 0.0, None, id="ok"),
])
def test_only_a_failure_in_0ms_right_after_a_denied_approval_is_the_operators(
    outcome: str, duration_ms: float, expected: str | None
) -> None:
    steps = steps_table([approval_step("r", 0, False), tool_step("r", 1, "mcp_github_x", outcome, duration_ms)])
    assert denials(steps).to_pylist() == [None, expected]


def test_a_policy_decision_explains_the_first_failed_call_of_its_tool_at_or_after_it_else_the_nearest_before() -> None:
    steps = steps_table([
        tool_step("r", 0, "mcp_github_x", "failed", 3.0, crdate=BASE),
        tool_step("r", 1, "mcp_github_x", "failed", 3.0, crdate=BASE + 10),
        tool_step("r", 2, "mcp_github_y", "failed", 3.0, crdate=BASE + 20),
        tool_step("r", 3, "mcp_github_x", "failed", 3.0, crdate=BASE + 30),
        tool_step("r", 4, "mcp_github_x", "ok", 3.0, crdate=BASE + 40),
    ])
    truths = ServerTruths(policy_denials={"r": (("mcp_github_x", BASE + 5), ("mcp_github_x", BASE + 50))})
    # The first decision takes the call at +10; the second has none after it: the nearest before, at +30.
    assert denials(steps, truths).to_pylist() == [None, "policy", None, "policy", None]
    assert denials(steps).to_pylist() == [None] * 5


def test_where_both_rules_explain_a_call_it_is_the_operators() -> None:
    steps = steps_table([approval_step("r", 0, False), tool_step("r", 1, "mcp_github_x", "failed")])
    truths = ServerTruths(policy_denials={"r": (("mcp_github_x", BASE),)})
    assert denials(steps, truths).to_pylist() == [None, Denial.OPERATOR.value]


def test_the_catalogue_sets_the_server_of_the_tools_it_knows_and_leaves_the_others_to_the_name_rule() -> None:
    steps = steps_table([tool_step("r", 0, "mcp_github_x", "ok"), tool_step("r", 1, "mcp_github_y", "ok")])
    remapped = with_catalogue_servers(steps, {"mcp_github_x": "gh_enterprise"})
    assert remapped.column("server").to_pylist() == ["gh_enterprise", "github"]
    assert remapped.schema == steps.schema
    assert with_server_truths(steps, NO_TRUTHS).column_names == [*CHECKED_SCHEMA.names, DENIAL_COLUMN]


def test_figures_count_a_policy_denial_as_denied() -> None:
    steps = steps_table([tool_step("r", 0, "mcp_github_x", "failed", 4.0), tool_step("r", 1, "mcp_github_x", "ok")])
    truths = ServerTruths(policy_denials={"r": (("mcp_github_x", BASE),)})
    counts = SiteFigures.of(with_server_truths(steps, truths), "UTC").by_server["github"].counts
    assert (counts.ok, counts.failed, counts.denied, counts.calls, counts.decisive) == (1, 0, 1, 2, 1)
    assert counts.failure_rate == 0.0


# ---------------------------------------------------------------- policy denials and the catalogue through the build

GOVERNED = [
    call(0, "mcp_github_create_issue", "failed", 2.0, run=9, crdate=BASE),
    call(1, "mcp_github_create_issue", "failed", 800.0, run=9, crdate=BASE + 5),
    call(2, "mcp_github_list", "ok", 120.0, run=9, crdate=BASE + 6),
    call(3, "mcp_legacy_tool", "ok", 80.0, run=9, crdate=BASE + 7),
]
TRUTHS = ServerTruths(
    tool_servers={"mcp_github_create_issue": "github_enterprise", "mcp_github_list": "github_enterprise"},
    orphaned=frozenset({"mcp_github_list"}),
    policy_denials={"9": (("mcp_github_create_issue", BASE),)},
)


def _build(tmp_path: Path, truths: ServerTruths, name: str = "site") -> tuple[pipeline.BuildResult, dict[str, Any]]:
    source = tmp_path / "events.jsonl"
    if not source.exists():  # written once: a second build finds it in the input cache
        write_events(source, GOVERNED)
    out = tmp_path / name
    result = pipeline.build([str(source)], out, options=BuildOptions(cache_dir=tmp_path / "cache"), truths=truths)
    assert result.timings[pipeline.FAST_PATH_ROWS] in (0, len(GOVERNED))  # 0 when the cache brought the input
    return result, json.loads((out / "summary.json").read_text(encoding="utf-8"))


def test_a_policy_denial_and_the_catalogues_servers_reach_every_figure(tmp_path: Path) -> None:
    result, summary = _build(tmp_path, TRUTHS)
    assert result.timings[pipeline.FAST_PATH_ROWS] == len(GOVERNED)
    assert set(summary["servers"]) == {"github_enterprise", "legacy"}, "the catalogue's server, else the name rule"
    server = summary["servers"]["github_enterprise"]
    assert (server["ok"], server["failed"], server["denied"], server["failure_rate"]) == (1, 1, 1, 0.5)
    assert server["tools"]["mcp_github_list"]["orphaned"] and not server["tools"]["mcp_github_create_issue"]["orphaned"]
    run_page = page(tmp_path / "site" / "de" / "runs" / "9.html")
    denied = [cells(row) for row in run_page.find_all("tr") if "step-denied" in row.classes]
    assert [row[0] for row in denied] == ["0"] and "durch Richtlinie verweigert" in denied[0][7]
    assert "github_enterprise" in denied[0][6]


@pytest.mark.parametrize("language", ["en", "de"])
def test_an_orphaned_tool_is_marked_on_its_servers_tool_table(tmp_path: Path, language: str) -> None:
    _build(tmp_path, TRUTHS)
    server = page(tmp_path / "site" / language / "servers" / "github_enterprise.html")
    tools = {row[0]: row for row in map(cells, table_rows(server, "tools"))}
    word = {"en": "orphaned", "de": "verwaist"}[language]
    [orphaned] = [name for name in tools if word in name]
    assert orphaned.startswith("mcp_github_list")


def test_changed_tables_sweep_a_cached_input_again(tmp_path: Path) -> None:
    """The input cache keeps the checked rows of an unchanged file, but its sweep depends on the tables too."""
    first, without = _build(tmp_path, NO_TRUTHS)
    second, with_truths = _build(tmp_path, TRUTHS)
    assert first.timings[pipeline.FAST_PATH_ROWS] == len(GOVERNED) and second.timings[pipeline.FAST_PATH_ROWS] == 0
    assert set(without["servers"]) == {"github", "legacy"}
    assert "denied" not in without["servers"]["github"]  # no denial, no tables: nothing said of denials
    assert with_truths["servers"]["github_enterprise"]["denied"] == 1
    third, again = _build(tmp_path, TRUTHS)
    assert again == with_truths and third.pages_reused == third.pages_rendered + third.pages_reused


def test_the_archive_gains_no_column(tmp_path: Path) -> None:
    source = write_events(tmp_path / "events.jsonl", GOVERNED)
    archive = tmp_path / "history.parquet"
    options = BuildOptions(archive=archive, use_cache=False)
    pipeline.build([str(source)], tmp_path / "site", options=options, truths=TRUTHS)
    assert DENIAL_COLUMN not in pq.read_schema(archive).names
