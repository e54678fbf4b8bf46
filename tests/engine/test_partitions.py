"""A build takes the checked steps a partition of whole runs at a time (bounded memory):
how many partitions there are must never show in the site, and a run is never split."""

from __future__ import annotations

import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from site_helpers import SAMPLE, SAMPLE_SERVERS, build_ok, crafted_rows, read_jsonl, site_files, write_jsonl

from nrllm_report.aggregate import figures as aggregate
from nrllm_report.core.schema import CHECKED_SCHEMA
from nrllm_report.site import parallel as sitebuild
from nrllm_report.store import runs, spill


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The crafted rows (rejected rows, warnings, every outcome), then the sample, then a
    second file repeating some of the sample's rows: duplicates across inputs."""
    folder = tmp_path_factory.mktemp("inputs")
    sample = read_jsonl(SAMPLE)
    return [
        write_jsonl(folder / "crafted.jsonl", crafted_rows() + sample),
        write_jsonl(folder / "repeats.jsonl", sample[::7]),
    ]


def build_counting_partitions(monkeypatch: pytest.MonkeyPatch, inputs: list[Path], out: Path, rows: int) -> int:
    monkeypatch.setattr(spill, "PARTITION_ROWS", rows)
    partitions = 0
    figures_of = aggregate.SiteFigures.of

    def counting_of(steps: pa.Table, timezone_name: str) -> aggregate.SiteFigures:
        nonlocal partitions
        partitions += 1
        runs = steps.column("run").to_pylist()
        assert runs == sorted(runs)  # whole runs, in order
        return figures_of(steps, timezone_name)

    monkeypatch.setattr(aggregate.SiteFigures, "of", staticmethod(counting_of))
    build_ok(*inputs, "--out", out, "--servers", ",".join(SAMPLE_SERVERS), "--min-calls", "3", "--jobs", "1")
    return partitions


@pytest.mark.slow
def test_a_site_built_in_many_partitions_is_the_site_built_in_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, two_inputs: list[Path]
) -> None:
    assert build_counting_partitions(monkeypatch, two_inputs, tmp_path / "one", 10**9) == 1
    assert build_counting_partitions(monkeypatch, two_inputs, tmp_path / "many", 40) > 10
    one, many = site_files(tmp_path / "one"), site_files(tmp_path / "many")
    assert sorted(one) == sorted(many)
    assert [name for name in one if one[name] != many[name]] == []
    problems = (tmp_path / "many" / "en" / "problems.html").read_text(encoding="utf-8")
    assert "duplicate-step" in problems and "tool-step-without-flag" in problems
    # Forked workers, a partition at a time (one language) or a language at a time (both).
    monkeypatch.setattr(sitebuild, "PARALLEL_THRESHOLD", 10)
    options = ["--servers", ",".join(SAMPLE_SERVERS), "--min-calls", "3", "--jobs", "2"]
    build_ok(*two_inputs, "--out", tmp_path / "many-jobs", *options)
    assert site_files(tmp_path / "many-jobs") == many
    build_ok(*two_inputs, "--out", tmp_path / "german-jobs", "--lang", "de", *options)
    build_ok(*two_inputs, "--out", tmp_path / "german", "--lang", "de", *options[:-1], "1")
    assert site_files(tmp_path / "german-jobs") == site_files(tmp_path / "german")


@pytest.mark.slow
def test_a_page_gone_from_the_previous_site_is_rendered_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, two_inputs: list[Path]
) -> None:
    monkeypatch.setattr(spill, "PARTITION_ROWS", 40)
    monkeypatch.setattr(sitebuild, "PARALLEL_THRESHOLD", 10)
    options = ["--servers", ",".join(SAMPLE_SERVERS), "--jobs", "2"]
    build_ok(*two_inputs, "--out", tmp_path / "site", *options)
    before = site_files(tmp_path / "site")
    removed = sorted(name for name in before if "/runs/" in name)[::5]
    for name in removed:
        (tmp_path / "site" / name).unlink()
    build_ok(*two_inputs, "--out", tmp_path / "site", *options)
    assert site_files(tmp_path / "site") == before


def test_a_run_keeps_its_bucket_in_every_batch_and_every_build() -> None:
    runs = ["run-1", "Run-1", "ä/ö", "", "x" * 300, "run-1"]
    first = spill.buckets_of(pa.array(runs)).to_pylist()
    again = spill.buckets_of(pa.chunked_array([pa.array(runs[3:]), pa.array(runs[:3])])).to_pylist()
    assert first == [zlib.crc32(run.encode()) % spill.BUCKETS for run in runs]
    assert again == first[3:] + first[:3]
    assert first[0] == first[-1]


def _checked_rows(runs: list[str]) -> pa.RecordBatch:
    columns = {field.name: pa.nulls(len(runs), field.type) for field in CHECKED_SCHEMA}
    columns["run"] = pa.array(runs, pa.string())
    columns["row"] = pa.array(range(len(runs)), pa.int64())
    return pa.RecordBatch.from_pydict(columns, schema=CHECKED_SCHEMA)


@given(st.lists(st.lists(st.sampled_from([f"run-{number}" for number in range(40)]), max_size=30), max_size=5),
       st.integers(min_value=0, max_value=spill.BUCKETS), st.integers(min_value=0, max_value=spill.BUCKETS))
def test_a_spilled_inputs_buckets_read_back_are_its_rows_of_them_in_file_order(
    tmp_path_factory: pytest.TempPathFactory, chunks: list[list[str]], low: int, high: int
) -> None:
    """Each chunk is one record batch holding many buckets; a range of buckets reads back the
    rows of those buckets, chunk by chunk in bucket order, as an entry of one batch a bucket did."""
    first, stop = min(low, high), max(low, high)
    folder = tmp_path_factory.mktemp("spill")
    bucketed = spill.BucketedFile(folder / "input.arrow")
    for chunk in chunks:
        bucketed.add(_checked_rows(chunk))
    bucketed.close()
    assert len(set(bucketed.batches)) == sum(1 for chunk in chunks if chunk)  # one record batch a chunk
    expected = [row for chunk in chunks for bucket, row in
                sorted((spill.bucket_of(run), row) for row, run in enumerate(chunk)) if first <= bucket < stop]
    layout = bucketed.layout()
    steps = spill.SpilledInput.of(bucketed.path, 0, about=layout).steps(first, stop)
    assert (steps.column("row").to_pylist() if steps is not None else []) == expected

    # An entry written as builds before this layout wrote them: a record batch per bucket, no "batches".
    older = spill.BucketedFile(folder / "older.arrow")
    reader = pa.ipc.open_file(pa.memory_map(str(bucketed.path)))
    offsets: dict[int, int] = {}
    for batch_number, rows in zip(layout["batches"], layout["rows"], strict=True):
        start = offsets.get(batch_number, 0)
        older.file.write(reader.get_batch(batch_number).slice(start, rows))
        offsets[batch_number] = start + rows
    older.close()
    entry = {"buckets": layout["buckets"], "rows": layout["rows"]}
    steps = spill.SpilledInput.of(older.path, 0, about=entry).steps(first, stop)
    assert (steps.column("row").to_pylist() if steps is not None else []) == expected


@pytest.mark.slow
@given(st.lists(st.integers(min_value=0, max_value=5_000), min_size=spill.BUCKETS, max_size=spill.BUCKETS),
       st.integers(min_value=1, max_value=20_000))
def test_partitions_cover_every_bucket_once_in_order(bucket_rows: list[int], partition_rows: int) -> None:
    original = spill.PARTITION_ROWS
    spill.PARTITION_ROWS = partition_rows
    try:
        ranges = spill.partition_ranges(bucket_rows)
    finally:
        spill.PARTITION_ROWS = original
    assert ranges[0][0] == 0 and ranges[-1][1] == spill.BUCKETS
    assert all(left[1] == right[0] for left, right in zip(ranges, ranges[1:]))
    # Every partition but the last has at least the asked rows, and no more than one bucket beyond.
    for first, stop in ranges[:-1]:
        held = sum(bucket_rows[first:stop])
        assert held >= partition_rows and held - bucket_rows[stop - 1] < partition_rows


# ---------------------------------------------------------------- a run page's data key


def steps_table(rows: list[dict]) -> pa.Table:
    full = [{name: row.get(name) for name in CHECKED_SCHEMA.names} for row in rows]
    return pa.Table.from_pylist(full, schema=CHECKED_SCHEMA)


def keys_of(rows: list[dict]) -> dict[str, str]:
    table = steps_table(rows)
    spans = runs.run_spans(table)
    return {span.run: key for span, key in zip(spans, runs.run_data_keys(table, spans))}


def tool_row(run: str, sequence: int, **values: object) -> dict:
    return {"run": run, "sequence": sequence, "kind": "tool", "crdate": 1_788_000_000, "input_index": 0, "row": 1,
            **values}


def test_a_runs_key_is_its_rows_wherever_they_stand() -> None:
    alone = keys_of([tool_row("b", 0, toolName="x"), tool_row("b", 1, outcome="ok")])
    among = keys_of([tool_row("a", 0, toolName="y"), tool_row("b", 0, toolName="x"), tool_row("b", 1, outcome="ok"),
                     tool_row("c", 0)])
    assert alone["b"] == among["b"]
    assert len(set(among.values())) == 3


@pytest.mark.parametrize("left, right", [
    ({"toolName": "a\x1f", "server": "b"}, {"toolName": "a", "server": "\x1fb"}),
    ({"toolName": "a\\", "server": "e"}, {"toolName": "a", "server": "\\e"}),
    ({"toolName": None}, {"toolName": "\\0"}),
    ({"toolName": None}, {"toolName": ""}),
    ({"durationMs": 1.5}, {"durationMs": 1.25}),
    ({"outcome": "ok"}, {"outcome": "cancelled"}),
    ({"approved": True}, {"approved": None}),
    ({"toolSpecs": ["a", "b"]}, {"toolSpecs": ["a\x1eb"]}),
    ({"toolSpecs": ["a\x1e", "b"]}, {"toolSpecs": ["a", "\x1eb"]}),
    ({"toolSpecs": []}, {"toolSpecs": [""]}),
    ({"toolSpecs": []}, {"toolSpecs": None}),
    ({"droppedSources": ["x"], "toolSpecs": None}, {"droppedSources": None, "toolSpecs": ["x"]}),
    ({"contentLength": 1}, {"thinkingLength": 1}),
    ({"contentRedacted": True}, {"contentRedacted": False}),
    ({"toolName": "ab", "server": ""}, {"toolName": "a", "server": "b"}),
    ({"toolSpecs": ["ab"]}, {"toolSpecs": ["a", "b"]}),
    ({"toolSpecs": ["a"], "droppedSources": ["b"]}, {"toolSpecs": ["a", "b"], "droppedSources": []}),
    ({"promptTokens": None}, {"promptTokens": 0}),
])
def test_rows_that_differ_in_what_a_page_shows_have_different_keys(left: dict, right: dict) -> None:
    assert keys_of([tool_row("r", 0, **left)]) != keys_of([tool_row("r", 0, **right)])



@given(st.lists(st.integers(min_value=1, max_value=400), max_size=60), st.integers(min_value=1, max_value=5))
def test_the_render_workers_shares_hold_each_run_of_a_partition_once_in_order(run_rows: list[int],
                                                                             workers: int) -> None:
    """Shares of a partition's runs: each run in exactly one, consecutive, none with more rows
    than an equal part and a run."""
    starts = [sum(run_rows[:number]) for number in range(len(run_rows))]
    spans = [runs.RunSpan(f"run-{number}", start, start + rows)
             for number, (start, rows) in enumerate(zip(starts, run_rows, strict=True))]
    rows = sum(run_rows)
    shares = [sitebuild.Share(number, workers).of(spans, rows=rows) for number in range(workers)]
    assert [span for share in shares for span in share] == spans
    for share in shares:
        assert sum(span.stop - span.start for span in share) <= rows / workers + max(run_rows, default=0)
    assert sitebuild.Share().of(spans, rows=rows) == spans
