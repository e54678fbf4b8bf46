"""Validate, normalize and timeline in bounded memory, byte for byte what they gave
when they held the whole checked table; timeline reading only what can hold its run.

The old in-memory path is kept here only, as the reference: ``check_inputs`` holds every
checked row, and the commands are rebuilt on it as they were.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from command_line import invoke
from site_helpers import REPO, SAMPLE, SAMPLE_SERVERS, crafted_rows, read_jsonl, step, tool, write_jsonl

from nrllm_report import pipeline
from nrllm_report.aggregate import figures as aggregate
from nrllm_report.aggregate.denials import with_server_truths
from nrllm_report.check.checked import CheckedRows, check_inputs
from nrllm_report.check.one_run import check_run, concerns_run
from nrllm_report.core.options import BuildOptions
from nrllm_report.core.schema import CANONICAL_SCHEMA
from nrllm_report.core.tables import NO_TRUTHS
from nrllm_report.output import writer
from nrllm_report.readers import resolve_inputs
from nrllm_report.site import pages
from nrllm_report.site.timeline_plan import TimelinePlan
from nrllm_report.site.waterfall import RunSteps
from nrllm_report.store import ordered, spill
from nrllm_report.store.cache import INPUTS_FOLDER, site_entry

SERVERS = list(SAMPLE_SERVERS)
SAMPLE_PARQUET = REPO / "sample_data" / "runs.parquet"


# ---------------------------------------------------------------- the reference: the whole table in memory


def reference_validate(names: list[str]) -> CheckedRows:
    return check_inputs(resolve_inputs(names), SERVERS).tally


def reference_normalize(names: list[str], out: Path) -> CheckedRows:
    checked = check_inputs(resolve_inputs(names), SERVERS)
    in_reading_order = checked.steps.sort_by([("input_index", "ascending"), ("row", "ascending")])
    writer.record_writer_for(out)(out, in_reading_order.select(CANONICAL_SCHEMA.names))
    return checked.tally


def reference_timeline(run: str, names: list[str], language: str = "en") -> tuple[str, list[str]]:
    """The page and the problem lines the whole check gives for ``run``."""
    checked = check_inputs(resolve_inputs(names), SERVERS)
    steps = with_server_truths(checked.steps.filter(pc.equal(checked.steps.column("run"), run)), NO_TRUTHS)
    options = BuildOptions(languages=(language,), known_servers=tuple(SERVERS))
    summary = aggregate.run_summaries(steps, aggregate.tool_steps(steps))[0]
    kit = pipeline.page_kits(replace(options, languages=(language,)), None,
                             denials_shown=summary.counts.denied > 0)[language]
    plan = TimelinePlan(steps, {language: kit}, server_href={})
    markup = plan.rows(language, start=0, stop=steps.num_rows)
    page = pages.run_page(kit, summary, rows=markup, span=(0, steps.num_rows), server_href={}, standalone=True,
                          steps=RunSteps(plan.step_columns, 0, steps.num_rows))
    return page, [line_of(problem) for problem in checked.tally.problems if concerns_run(problem, run)]


def line_of(problem: Any) -> str:
    return f"{problem.input}:{problem.row}: {problem.rule.value}: {problem.text()}"



# ---------------------------------------------------------------- inputs with duplicates and bad rows across partitions


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Crafted rows (rejected rows, warnings), the sample, unreadable lines among them, then a
    second file repeating some rows of the first (duplicates across inputs) and a Parquet file
    of several row groups repeating others."""
    folder = tmp_path_factory.mktemp("messy")
    sample = read_jsonl(SAMPLE)
    first = write_jsonl(folder / "first.jsonl", crafted_rows() + sample)
    lines = first.read_bytes().splitlines(keepends=True)
    lines[5:5] = [b"{not json\n", b"\n", b"[1, 2]\n", b'{"run": "\xff"}\n', b"null\n"]
    first.write_bytes(b"".join(lines))
    repeats = write_jsonl(folder / "repeats.jsonl", sample[::7] + [step("big-3", 0), step("fresh", 0, "oddkind")])
    table = pa.Table.from_pylist([{**row, "payload": json.dumps(row["payload"])} for row in sample[3::5]])
    pq.write_table(table, folder / "again.parquet", row_group_size=17)
    return [str(first), str(repeats), str(folder / "again.parquet")]


@pytest.fixture
def many_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of about 40 rows, merge batches of a few rows, record batches of 100 rows."""
    monkeypatch.setattr(spill, "PARTITION_ROWS", 40)
    monkeypatch.setattr(ordered, "MERGE_ROWS", 64)
    monkeypatch.setattr(ordered, "MIN_BATCH_ROWS", 3)
    monkeypatch.setattr(writer, "RECORD_BATCH_ROWS", 100)


def test_the_messy_inputs_have_what_this_is_about(messy: list[str]) -> None:
    rules = {problem.rule.value for problem in reference_validate(messy).problems}
    assert {"duplicate-step", "unreadable-row", "tool-step-without-flag", "unknown-kind", "missing-field"} <= rules
    assert pq.ParquetFile(messy[2]).num_row_groups > 5


@pytest.mark.usefixtures("many_partitions")
@pytest.mark.parametrize("output_format", ["text", "json"])
@pytest.mark.parametrize("which", ["sample", "sample-parquet", "messy"])
def test_validate_prints_what_the_whole_check_printed(messy: list[str], which: str, output_format: str) -> None:
    names = {"sample": [str(SAMPLE)], "sample-parquet": [str(SAMPLE_PARQUET)], "messy": messy}[which]
    assert len(spill.partition_ranges([4] * spill.BUCKETS)) > 10
    result = invoke("validate", *names, "--format", output_format, "--servers", ",".join(SERVERS))
    tally = reference_validate(names)
    if output_format == "json":
        expected = json.dumps(tally.to_json(), ensure_ascii=False, indent=2) + "\n"
    else:
        warnings = sum(1 for problem in tally.problems if problem.severity.value == "warning")
        expected = "".join(line_of(problem) + "\n" for problem in tally.problems)
        expected += (f"{tally.rows_read} rows read: {tally.rows_valid} valid, {tally.rows_rejected} rejected, "
                     f"{warnings} warning{'' if warnings == 1 else 's'}.\n")
    assert result.output == expected
    assert result.exit_code == (1 if tally.has_errors else 0)


@pytest.mark.slow
@pytest.mark.usefixtures("many_partitions")
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize("which", ["sample", "messy"])
def test_normalize_writes_the_bytes_the_whole_table_wrote(
    tmp_path: Path, messy: list[str], which: str, suffix: str
) -> None:
    names = [str(SAMPLE)] if which == "sample" else messy
    expected = reference_normalize(names, tmp_path / f"expected{suffix}")
    tally = pipeline.normalize(names, tmp_path / f"bounded{suffix}", known_servers=SERVERS)
    assert (tmp_path / f"bounded{suffix}").read_bytes() == (tmp_path / f"expected{suffix}").read_bytes()
    assert tally.to_json() == expected.to_json()
    if suffix == ".parquet":  # more than one row group, cut where one table's batches were cut
        assert pq.ParquetFile(tmp_path / f"bounded{suffix}").num_row_groups > 2
    assert [entry.name for entry in tmp_path.iterdir() if entry.name.startswith(".")] == []


def test_the_merge_gives_every_row_once_in_reading_order(tmp_path: Path) -> None:
    schema = pa.schema([("input_index", pa.int32()), ("row", pa.int64())])
    rows = [{"input_index": index, "row": row} for index in range(3) for row in range(1, 400)]
    random.Random(14).shuffle(rows)
    cuts = [0, 5, 180, 181, 450, 700, 1000, len(rows)]  # seven partitions of uneven size
    paths = []
    for part, (first, stop) in enumerate(zip(cuts, cuts[1:])):
        paths.append(tmp_path / f"{part}.arrow")
        ordered.write_in_reading_order(
            pa.Table.from_pylist(rows[first:stop], schema), paths[-1], batch_rows=1 + part * 3
        )
    merged = pa.concat_tables(list(ordered.merged_in_reading_order(paths, schema)))
    pairs = list(zip(merged.column("input_index").to_pylist(), merged.column("row").to_pylist()))
    assert pairs == sorted((row["input_index"], row["row"]) for row in rows)


# ---------------------------------------------------------------- timeline


def timeline_of(tmp_path: Path, run: str, names: list[str], *options: str) -> tuple[str, list[str]]:
    out = tmp_path / "timeline.html"
    result = invoke("timeline", run, *names, "--out", out, "--servers", ",".join(SERVERS), *options)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1].startswith("Wrote the timeline")
    return out.read_text(encoding="utf-8"), lines[:-1]


def runs_of(names: list[str]) -> list[str]:
    checked = check_inputs(resolve_inputs(names), SERVERS)
    return sorted(set(checked.steps.column("run").to_pylist()))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["sample", "sample-parquet", "messy"])
def test_every_runs_timeline_is_the_page_of_the_whole_check(tmp_path: Path, messy: list[str], which: str) -> None:
    names = {"sample": [str(SAMPLE)], "sample-parquet": [str(SAMPLE_PARQUET)], "messy": messy}[which]
    runs = runs_of(names)
    for run in runs[:: max(1, len(runs) // 12)] + ["big-3", "mixed-run", "fresh"] * (which == "messy"):
        assert timeline_of(tmp_path, run, names) == reference_timeline(run, names), run


def test_a_timeline_reports_its_runs_problems_and_every_unreadable_line(tmp_path: Path, messy: list[str]) -> None:
    _page, lines = timeline_of(tmp_path, "big-3", messy)
    assert [line.split(": ")[1] for line in lines] == ["unreadable-row"] * 4 + ["duplicate-step"]
    assert "repeats.jsonl" in lines[-1]


def test_timeline_of_standard_input_is_the_whole_checks(tmp_path: Path) -> None:
    out = tmp_path / "stdin.html"
    result = invoke(
        "timeline",
        "mixed-run",
        "-",
        "--out",
        str(out),
        input=Path(write_jsonl(tmp_path / "in.jsonl", crafted_rows())).read_bytes(),
    )
    assert result.exit_code == 0, result.output
    page, lines = reference_timeline("mixed-run", [str(tmp_path / "in.jsonl")])
    assert out.read_text(encoding="utf-8") == page
    assert [line.split(": ", 1)[1] for line in result.output.splitlines()[:-1]] == [
        line.split(": ", 1)[1] for line in lines]


def test_an_unknown_run_still_gets_its_close_matches(messy: list[str], tmp_path: Path) -> None:
    result = invoke("timeline", "big-33", *messy, "--out", tmp_path / "x.html")
    assert result.exit_code == 2
    assert "run 'big-33' is not in the input; did you mean 'big-3'" in result.output


# ---------------------------------------------------------------- JSON Lines: which lines are read


def tricky_lines() -> list[bytes]:
    """The run ``r/1`` spelled plainly, escaped and as part of other runs; lines that cannot be read."""
    def line(row: dict[str, Any]) -> bytes:
        return json.dumps(row, ensure_ascii=False).encode("utf-8")
    return [
        b"\xef\xbb\xbf" + line(step("r/1", 0, "context")),
        line(tool("r/11", 1, "mcp_x_y", True)),
        line(step("r/1", 1)).replace(b"r/1", b"r\\/1"),  # an escaped slash: the same run
        line(step("r/1", 2)).replace(b'"r/1"', b'"\\u0072/1"'),  # a \u escape: the same run
        b"   ",
        line(step("other", 0, payload={"note": "r/1"})),  # the run's bytes in another run's row
        b'{"run": "r/1", "sequence": 3',  # cut short
        b"\xfe\xff",
        line(tool("r/1", 4, "mcp_x_y", "no")),  # the run's own rejected row
        line(step("r/1", 2)),  # a duplicate within the run
        line(tool("r/1", 5, "local", None)),  # a warning
        b"[]",
        line(step("7", 0)),
        line({**step("7", 1), "run": 7}),  # a uid: the run "7"
        line(step("77", 0)),
    ]


@pytest.mark.parametrize("run", ["r/1", "7", "other"])
@pytest.mark.parametrize("block_lines", [2, 4096])
def test_json_lines_give_the_runs_rows_and_every_unreadable_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: str, block_lines: int
) -> None:
    from nrllm_report.readers import json as json_reader
    monkeypatch.setattr(json_reader, "BLOCK_LINES", block_lines)  # both the whole read and the run's cut here
    source = tmp_path / "tricky.jsonl"
    source.write_bytes(b"\n".join(tricky_lines()) + b"\n")
    checked = check_run(run, resolve_inputs([str(source)]), known_servers=SERVERS)
    whole = check_inputs(resolve_inputs([str(source)]), SERVERS)
    steps = whole.steps.filter(pc.equal(whole.steps.column("run"), run))
    assert checked.steps.equals(steps)
    assert checked.problems == [problem for problem in whole.tally.problems if concerns_run(problem, run)]
    assert {problem.row for problem in checked.problems if problem.rule.value == "unreadable-row"} == {7, 8, 12}


def test_json_lines_parse_only_the_lines_that_may_hold_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nrllm_report.readers import one_run
    parsed: list[bytes] = []
    parse = one_run.parse_json_line

    def counting(line: bytes) -> Any:
        parsed.append(line)
        return parse(line)

    monkeypatch.setattr(one_run, "parse_json_line", counting)
    rows = [step(f"run-{index}", sequence) for index in range(200) for sequence in range(3)]
    source = write_jsonl(tmp_path / "many.jsonl", rows)
    checked = check_run("run-170", resolve_inputs([str(source)]), known_servers=SERVERS)
    assert checked.steps.column("sequence").to_pylist() == [0, 1, 2]
    assert len(parsed) == 3


# ---------------------------------------------------------------- Parquet: which row groups are read


@pytest.fixture
def read_row_groups(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, Any]]:
    """Every ``read_row_group`` call: the group and the columns asked for (None: all of them)."""
    calls: list[tuple[int, Any]] = []
    read_group, iter_batches = pq.ParquetFile.read_row_group, pq.ParquetFile.iter_batches

    def counting(self: pq.ParquetFile, index: int, columns: Any = None, **kwargs: Any) -> pa.Table:
        calls.append((index, columns))
        return read_group(self, index, columns=columns, **kwargs)

    def whole_file(self: pq.ParquetFile, *args: Any, **kwargs: Any) -> Any:
        calls.append((-1, "the whole file"))
        return iter_batches(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", whole_file)
    return calls


def many_runs_parquet(path: Path, sort: bool) -> Path:
    rows = [step(f"run-{index:03d}", sequence, crdate=1_788_000_000 + index * 60 + sequence)
            for index in range(120) for sequence in range(5)]
    if not sort:
        random.Random(3).shuffle(rows)
    table = pa.Table.from_pylist([{**row, "payload": json.dumps(row["payload"])} for row in rows])
    pq.write_table(table, path, row_group_size=50)
    return path


@pytest.mark.parametrize("sort", [True, False], ids=["runs-in-order", "runs-shuffled"])
def test_timeline_reads_fewer_row_groups_than_the_parquet_file_has(
    tmp_path: Path, read_row_groups: list[tuple[int, Any]], sort: bool
) -> None:
    source = many_runs_parquet(tmp_path / "runs.parquet", sort)
    groups = pq.ParquetFile(source).num_row_groups
    page, lines = timeline_of(tmp_path, "run-061", [str(source)])
    full_reads = [index for index, columns in read_row_groups if columns is None]
    run_column_reads = [index for index, columns in read_row_groups if columns is not None]
    assert groups == 12 and 0 < len(full_reads) < groups
    assert (-1, "the whole file") not in read_row_groups
    if sort:  # the statistics exclude every group but the run's: not even its run column is read
        assert len(full_reads) == 1 and len(run_column_reads) == 1
    else:
        assert len(run_column_reads) == groups
    assert (page, lines) == reference_timeline("run-061", [str(source)])


def test_a_uid_run_column_is_compared_as_a_number(tmp_path: Path, read_row_groups: list[tuple[int, Any]]) -> None:
    rows = [{**step("x", sequence), "run": run, "payload": "{}"} for run in range(100) for sequence in range(2)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "uids.parquet", row_group_size=20)
    checked = check_run("42", resolve_inputs([str(tmp_path / "uids.parquet")]), known_servers=SERVERS)
    assert checked.steps.column("run").to_pylist() == ["42", "42"]
    assert [index for index, columns in read_row_groups if columns is None] == [4]
    assert check_run("042", resolve_inputs([str(tmp_path / "uids.parquet")]), known_servers=SERVERS).steps.num_rows == 0


# ---------------------------------------------------------------- timeline from the input cache


@pytest.mark.slow
def test_timeline_takes_the_run_from_a_builds_input_cache(
    tmp_path: Path, messy: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    caches = tmp_path / "caches"
    built = invoke("build", *messy, "--out", site, "--servers", ",".join(SERVERS), "--lang", "en",
                    "--cache-dir", caches)
    assert built.exit_code == 0, built.output
    cache = site_entry(caches, site.resolve()) / INPUTS_FOLDER
    assert cache.is_dir()
    expected = reference_timeline("big-3", messy)
    from nrllm_report.check import one_run

    def unread(*args: Any) -> Any:
        raise AssertionError("an input cached was read again")

    with monkeypatch.context() as patched:
        patched.setattr(one_run, "run_rows", unread)
        assert timeline_of(tmp_path, "big-3", messy, "--cache-dir", str(cache)) == expected
        assert timeline_of(tmp_path, "big-3", messy, "--cache-dir", str(caches)) == expected  # a folder of caches
        # Another server list keys the entries otherwise: the inputs would be read.
        assert invoke("timeline", "big-3", *messy, "--out", tmp_path / "x.html", "--cache-dir", cache).exit_code != 0
    result = invoke("timeline", "big-3", *messy, "--out", tmp_path / "other.html", "--cache-dir", cache)
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_timeline_looks_in_the_users_cache_folder_unless_told_not_to(
    tmp_path: Path, messy: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    built = invoke("build", *messy, "--out", tmp_path / "site", "--servers", ",".join(SERVERS), "--lang", "en")
    assert built.exit_code == 0, built.output
    from nrllm_report.check import one_run
    read: list[str] = []
    run_rows = one_run.run_rows

    def counted(source: Any, *args: Any) -> Any:
        read.append(source.name)
        return run_rows(source, *args)

    monkeypatch.setattr(one_run, "run_rows", counted)
    expected = reference_timeline("mixed-run", messy)
    assert timeline_of(tmp_path, "mixed-run", messy) == expected
    assert read == []
    assert timeline_of(tmp_path, "mixed-run", messy, "--no-cache") == expected
    assert read == messy
