"""The fast path's coverage is part of the test.

Every rule's trigger and near miss (``test_validate``) and the privacy plant
(``test_privacy``) go through the commands inside batches of valid rows, in the
shapes real exports have (one type per column), as JSON Lines and as Parquet. Each
test asserts what the row checker says about every row, and that the batch took the
fast path: every valid row of it is vouched for by ``fastpath.check_batch`` (a spy
counts them). A fast path made lenient, or leaking content, fails them: the last
tests plant such faults and expect the checks to catch them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from command_line import invoke, run_cli
from conftest import check_one, jsonl_bytes, rules_of
from rules.test_validate import FIRST_RULE_WINS, NEAR_MISSES, TRIGGERS
from safety.test_privacy import MARKER, RUN, content_rows, files_with_marker, secret
from safety_helpers import FIRST_CRDATE

from nrllm_report.check import fastpath
from nrllm_report.core.model import Unreadable

FILLERS = 200  # valid rows around the cases: a batch as a real export's
# Valid rows the fast path leaves to the row checker on purpose, and why.
ROW_BY_ROW = {
    "duration-spellings-agree": "both spellings given: Arrow has made 12 and 12.0 one type; the rules tell them apart",
}
SERVERS = "github,jira_cloud"


@dataclass
class Spy:
    """Which rows (by input index and row number) the fast path examined and vouched for."""

    examined: set[tuple[int, int]] = field(default_factory=set)
    vouched: set[tuple[int, int]] = field(default_factory=set)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    seen = Spy()
    check_batch = fastpath.check_batch

    def spying(table: pa.Table, *, input_index: int, rows: pa.Array, known_servers: Any) -> fastpath.FastResult:
        result = check_batch(table, input_index=input_index, rows=rows, known_servers=known_servers)
        seen.examined.update((input_index, row) for row in rows.to_pylist())
        seen.vouched.update((input_index, row) for row in result.clean.column("row").to_pylist())
        return result

    monkeypatch.setattr(fastpath, "check_batch", spying)
    return seen


# ---------------------------------------------------------------- the cases in batches


@dataclass(frozen=True)
class Case:
    name: str
    raw: Any
    rule: str | None  # the error the row checker gives it alone; None for a near miss


def cases() -> list[Case]:
    """Every trigger and near miss, each with a run and sequence of its own where it had the common ones."""
    found = [Case(param.id or "", param.values[0], param.values[1]) for param in TRIGGERS + FIRST_RULE_WINS]
    found += [Case(param.id or "", param.values[0], None) for param in NEAR_MISSES]
    return [Case(case.name, _own_identity(case.raw, index), case.rule) for index, case in enumerate(found)]


def _own_identity(raw: Any, index: int) -> Any:
    if not isinstance(raw, dict):
        return raw
    raw = dict(raw)
    if raw.get("run") == 7:
        raw["run"] = 7_000 + index
    if raw.get("sequence") == 3:
        raw["sequence"] = 3_000 + index
    return raw


def line_of(raw: Any) -> bytes:
    if isinstance(raw, Unreadable):
        return b'{"run": 7, "sequence": 3, "kind":'  # a line cut off
    return json.dumps(raw).encode()


def shape_of(raw: Any) -> tuple[str, str]:
    """The export shape a row belongs to: run as number or text, payload as object or text."""
    run = raw.get("run") if isinstance(raw, dict) else None
    payload = raw.get("payload") if isinstance(raw, dict) else None
    return ("text" if isinstance(run, str) else "number", "text" if isinstance(payload, str) else "object")


def filler_rows(shape: tuple[str, str], count: int = FILLERS) -> list[dict[str, Any]]:
    """Valid rows of every kind, tool steps of all three outcomes, all facts, in one shape."""
    rows = []
    for index in range(count):
        run: Any = f"filler-{index // 5}" if shape[0] == "text" else 900_000 + index // 5
        payload: dict[str, Any] = [
            {"toolName": "mcp_jira_cloud_search", "toolIsError": True, "toolOutcome": "cancelled"},
            {"finishReason": "stop", "promptTokens": index, "completionTokens": 3, "totalTokens": index + 3,
             "estimatedCost": 0.25, "requestedToolCalls": [{"name": "mcp_github_x"}], "content": "hello"},
            {"messagesSent": [{"role": "user"}], "toolSpecs": ["mcp_github_x"]},
            {"approved": True, "decidedBy": 4},
            {"toolName": "read_file", "toolIsError": False},
        ][index % 5]
        kind = ["tool", "llm", "request", "approval", "tool"][index % 5]
        rows.append({"run": run, "sequence": index % 5, "kind": kind, "round": 1, "duration_ms": 12.5,
                     "crdate": FIRST_CRDATE + index,
                     "payload": json.dumps(payload) if shape[1] == "text" else payload})
    return rows


@dataclass
class Batch:
    """One shape's cases among its fillers: what each row is, by row number."""

    lines: list[bytes]
    cases: dict[int, Case]
    fillers: set[int]
    duplicates: set[int]


def batches() -> Iterator[tuple[tuple[str, str], Batch]]:
    """A batch per shape of the cases in it."""
    by_shape: dict[tuple[str, str], list[Case]] = {}
    for case in cases():
        by_shape.setdefault(shape_of(case.raw), []).append(case)
    for shape, shaped in sorted(by_shape.items()):
        yield shape, batch_of(shape, shaped)


def batch_of(shape: tuple[str, str], shaped: list[Case]) -> Batch:
    """A case every fifth row among the fillers, then two later copies of fillers (duplicates)."""
    fillers = [json.dumps(row).encode() for row in filler_rows(shape)]
    waiting = list(shaped)
    batch = Batch([], {}, set(), set())
    for index, line in enumerate(fillers):
        batch.lines.append(line)
        batch.fillers.add(len(batch.lines))
        if index % 4 == 3 and waiting:
            case = waiting.pop()
            batch.lines.append(line_of(case.raw))
            batch.cases[len(batch.lines)] = case
    for case in waiting:
        batch.lines.append(line_of(case.raw))
        batch.cases[len(batch.lines)] = case
    for copied in (fillers[10], fillers[11]):  # duplicates, found on the whole as the commands do
        batch.lines.append(copied)
        batch.duplicates.add(len(batch.lines))
    return batch


def validate(path: Path) -> dict[str, Any]:
    result = invoke("validate", str(path), "--format", "json", "--servers", SERVERS)
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def errors_by_row(report: dict[str, Any]) -> dict[int, str]:
    return {problem["row"]: problem["rule"] for problem in report["problems"] if problem["severity"] == "error"}


def assert_batch_checked_as_the_rules_say(report: dict[str, Any], batch: Batch, spy: Spy, rows: set[int]) -> None:
    """Each case's rule at its row, the duplicates found, and every valid row vouched for by the fast path."""
    errors = errors_by_row(report)
    for row, case in batch.cases.items():
        if row in rows:
            assert errors.get(row) == case.rule, (case.name, errors.get(row))
    for row in batch.duplicates:
        assert errors.get(row) == "duplicate-step"
    kept = {row for row in rows if row not in errors}
    missed = sorted(row for row in kept if (0, row) not in spy.vouched)
    named = [batch.cases[row].name if row in batch.cases else f"filler row {row}" for row in missed]
    assert set(named) <= set(ROW_BY_ROW), named
    # Duplicates are found on the whole, after the fast path: it vouches for no other rejected row.
    wrongly = sorted(row for row in errors if (0, row) in spy.vouched and row not in batch.duplicates)
    assert wrongly == [], [batch.cases[row].name if row in batch.cases else row for row in wrongly]


def test_the_cases_keep_their_rules_with_a_run_and_sequence_of_their_own() -> None:
    for case in cases():
        result = check_one(case.raw)
        if case.rule is None:
            assert result.step is not None, case.name
        else:
            assert rules_of(result) == [case.rule], case.name


@pytest.mark.parametrize("shape", sorted({shape_of(case.raw) for case in cases()}), ids="-".join)
def test_every_trigger_and_near_miss_in_a_json_lines_batch(tmp_path: Path, spy: Spy, shape: tuple[str, str]) -> None:
    batch = dict(batches())[shape]
    path = tmp_path / "batch.jsonl"
    path.write_bytes(jsonl_bytes(batch.lines))
    report = validate(path)
    assert_batch_checked_as_the_rules_say(report, batch, spy, set(range(1, len(batch.lines) + 1)))


PARQUET_SCHEMA = {
    "sequence": pa.int64(), "kind": pa.string(), "round": pa.int64(), "duration_ms": pa.float64(),
    "durationMs": pa.float64(), "crdate": pa.int64(), "payload": pa.string(), "toolName": pa.string(),
    "toolIsError": pa.bool_(), "toolOutcome": pa.string(), "server": pa.string(), "uid": pa.int64(),
}


def as_stored(raw: Any, run_type: pa.DataType) -> dict[str, Any] | None:
    """A case as a Parquet export with one type a column stores it (payload as JSON text, run as
    the column's type), or None when such columns cannot hold it (the column type sweep has those)."""
    if not isinstance(raw, dict) or not set(raw) <= {"run", *PARQUET_SCHEMA}:
        return None
    row = dict(raw)
    if isinstance(row.get("payload"), dict):
        row["payload"] = json.dumps(row["payload"])
    if run_type == pa.string() and isinstance(row.get("run"), int) and not isinstance(row.get("run"), bool):
        row["run"] = str(row["run"])  # the uid as its decimal text: the same run
    try:
        table = pa.Table.from_pylist([row], schema=pa.schema([("run", run_type), *PARQUET_SCHEMA.items()]))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return None
    held = table.to_pylist()[0]
    if any(type(held[key]) is not type(value) or held[key] != value for key, value in row.items()):
        return None  # converted on the way in (1.5 or True to an integer): not the same value
    return row


@pytest.mark.parametrize("run_type", [pa.int64(), pa.string()], ids=str)
def test_every_trigger_and_near_miss_a_parquet_file_can_hold_in_a_batch(
    tmp_path: Path, spy: Spy, run_type: pa.DataType
) -> None:
    stored = [Case(case.name, row, case.rule) for case in cases()
              if (row := as_stored(case.raw, run_type)) is not None]
    assert len(stored) >= len(cases()) // 2, "the Parquet batch must hold most cases"
    batch = batch_of(("number" if run_type == pa.int64() else "text", "text"), stored)
    rows = [json.loads(line) for line in batch.lines]
    path = tmp_path / "batch.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([("run", run_type), *PARQUET_SCHEMA.items()])), path)
    assert_batch_checked_as_the_rules_say(validate(path), batch, spy, set(range(1, len(rows) + 1)))


# ---------------------------------------------------------------- the privacy plant on the fast path


def fast_shaped_plant() -> list[dict[str, Any]]:
    """test_privacy's plant in the shapes nr-llm writes: toolSpecs as names (metadata, shown), the
    tool result and the thinking as text, which the fast path reads for their lengths: the secret there."""
    rows = content_rows()
    rows[1]["payload"]["toolSpecs"] = ["mcp_github_create_issue"]
    rows[4]["payload"]["toolResult"] = secret("toolResult as text")
    rows[9]["payload"]["thinking"] = secret("final thinking as text")
    return rows


def plant_batch(plant: list[dict[str, Any]]) -> list[dict[str, Any]]:
    fillers = filler_rows(("text", "object"))
    return fillers[:100] + plant + fillers[100:]


def plant_rows() -> set[int]:
    return set(range(101, 111))


@pytest.mark.parametrize("container", ["jsonl", "parquet"])
def test_the_privacy_plant_takes_the_fast_path_and_no_content_reaches_any_output(
    tmp_path: Path, spy: Spy, container: str
) -> None:
    rows = plant_batch(fast_shaped_plant())
    source = tmp_path / "in" / f"export.{container}"
    source.parent.mkdir()
    if container == "jsonl":
        source.write_bytes(jsonl_bytes(rows))
    else:
        pq.write_table(pa.Table.from_pylist([_as_columns(row) for row in rows]), source)
    out = tmp_path / "out"
    out.mkdir()
    results = [
        invoke("build", str(source), "--out", str(out / "site"), "--jobs", "1"),
        invoke("timeline", RUN, str(source), "--out", str(out / "timeline.html")),
        invoke("normalize", str(source), "--out", str(out / "records.jsonl")),
        invoke("normalize", str(source), "--out", str(out / "records.parquet")),
    ]
    assert [result.exit_code for result in results] == [0, 0, 0, 0], [result.output for result in results]
    assert plant_rows() <= {row for _input, row in spy.vouched}, "the plant must take the fast path"
    assert files_with_marker(out) == {}
    assert all(MARKER not in result.output for result in results)
    assert files_with_marker(tmp_path / "in"), "the marker must be planted in the input"


def _as_columns(row: dict[str, Any]) -> dict[str, Any]:
    """A row as a Parquet export holds it: payload and any other nested value as JSON text."""
    return {key: json.dumps(value) if isinstance(value, (dict, list)) else value for key, value in row.items()}


def test_the_original_plant_in_a_batch_leaks_nothing_and_its_rows_in_nr_llms_shapes_take_the_fast_path(
    tmp_path: Path, spy: Spy
) -> None:
    source = tmp_path / "export.jsonl"
    source.write_bytes(jsonl_bytes(plant_batch(content_rows())))
    result = invoke("build", str(source), "--out", str(tmp_path / "site"), "--jobs", "1")
    assert result.exit_code == 0, result.output
    vouched = {row for _input, row in spy.vouched}
    # toolSpecs as objects (not names), a tool result and thinking as objects (not text): not the
    # shapes nr-llm writes, and Arrow types each key; these rows are read row by row.
    assert plant_rows() - vouched == {102, 105, 110}
    assert files_with_marker(tmp_path / "site") == {}


def test_the_build_reports_how_many_rows_the_fast_path_took(tmp_path: Path) -> None:
    """The counter a user (and this suite, in a real process) can see: ``build --timings``."""
    source = tmp_path / "export.jsonl"
    source.write_bytes(jsonl_bytes(plant_batch(fast_shaped_plant()) + ["null"]))
    completed = run_cli("build", source, "--out", tmp_path / "site", "--timings", "--jobs", "1", "--no-cache")
    assert completed.returncode == 0, completed.stderr
    timings = json.loads(completed.stderr.strip().splitlines()[-1])
    assert timings["fast path rows"] == FILLERS + 10  # every row but the unreadable "null" line


# ---------------------------------------------------------------- faults the checks above must catch


def lenient_integer_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast path that no longer checks the token counts, decidedBy and the other counts."""
    monkeypatch.setattr(fastpath, "PAYLOAD_COUNTS", ())


def lenient_outcomes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast path that no longer checks ADR-191's invariants."""
    monkeypatch.setattr(fastpath, "_outcome_rules", lambda kind, flags, *, outcomes: [])


def lenient_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast path that takes any server, ``""`` too."""
    monkeypatch.setattr(fastpath, "_server_rules", lambda *servers: [])


@pytest.mark.parametrize("fault", [lenient_integer_facts, lenient_outcomes, lenient_server],
                         ids=lambda fault: fault.__name__)
def test_a_lenient_fast_path_fails_the_batch_checks(
    tmp_path: Path, spy: Spy, monkeypatch: pytest.MonkeyPatch, fault: Callable[[pytest.MonkeyPatch], None]
) -> None:
    fault(monkeypatch)
    caught = 0
    for shape, batch in batches():
        path = tmp_path / f"{'-'.join(shape)}.jsonl"
        path.write_bytes(jsonl_bytes(batch.lines))
        try:
            assert_batch_checked_as_the_rules_say(validate(path), batch, spy, set(range(1, len(batch.lines) + 1)))
        except AssertionError:
            caught += 1
    assert caught, "a fast path without this check passed every batch"


def test_a_fast_path_leaking_content_fails_the_privacy_check(
    tmp_path: Path, spy: Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    text_payload = fastpath._text_payload

    def leaking(payload: pa.Array) -> tuple[dict[str, pa.Array], pa.Array]:
        fields, readable = text_payload(payload)
        return {**fields, "finishReason": pc.coalesce(fields["finishReason"], payload)}, readable

    monkeypatch.setattr(fastpath, "_text_payload", leaking)
    with pytest.raises(AssertionError):
        test_the_privacy_plant_takes_the_fast_path_and_no_content_reaches_any_output(tmp_path, spy, "parquet")
