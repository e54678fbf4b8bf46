"""Build the same inputs with two versions of the tool and say whether the sites are the same.

    python bench/same_site.py 55f8997 14b2101     # the package per stage (issue 9): no page changed
    python bench/same_site.py HEAD~3 HEAD --runs 500 --jobs 2

Each revision is checked out into a temporary git worktree and runs as ``python -m
nrllm_report`` from there. Both build the same files: the bundled sample of the first
revision (with its servers) and a seeded generated export of ``--runs`` runs, with each
number of ``--jobs``. The sites are compared file by file and byte for byte; the marker
file is left out, since it holds a hash of the code that built the site. Exits 1 when any
pair differs, so a refactoring that must change nothing a user sees can be held to it.
Each is also built with the other tables of the whole run (issue 20): the sample's
``tx_nrllm_*.jsonl`` files, and the generated export's own (``generate_export.py --tables``),
so run headers, merged timelines and waterfalls with calls and decisions are compared too.

``--without-denials`` builds both from the same inputs less every run with a denied
approval (issue 20: an events-only site without denials stays byte-identical, while the
denials an operator made change the pages they touch).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import run  # noqa: E402  (the benchmark's seeded exports and site comparison)
import whole_run  # noqa: E402  (the seeded export with every table)

MARKER = ".nrllm-report-site.json"


def checkout(revision: str, folder: Path) -> Path:
    """A worktree of ``revision`` in ``folder``."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(folder), revision],
                   check=True)
    return folder


def build(tool: Path, inputs: list[str], out: Path, jobs: int) -> None:
    """A full build by the tool checked out at ``tool`` (its package comes first on the path there)."""
    command = [sys.executable, "-m", "nrllm_report", "build", *inputs, "--out", str(out), "--jobs", str(jobs),
               "--force"]
    completed = subprocess.run(command, cwd=tool, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"{tool.name}: {' '.join(command)} failed:\n{completed.stderr}")


def without_denials(source: Path, target: Path) -> Path:
    """``source``'s rows less every run with an approval an operator denied, as JSON Lines."""
    import pyarrow.parquet as pq

    rows = (pq.read_table(source).to_pylist() if source.suffix == ".parquet" else
            [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()])

    def denied(row: dict) -> bool:
        payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"] or "{}")
        return row["kind"] == "approval" and payload.get("approved") is False

    runs = {row["run"] for row in rows if denied(row)}
    target.write_text("".join(json.dumps(row) + "\n" for row in rows if row["run"] not in runs), encoding="utf-8")
    return target


def differing_files(left: Path, right: Path) -> list[str]:
    """The files, beside the marker, that one site has and the other lacks or holds otherwise."""
    sizes = {side: dict(run.site_file_sizes(side)) for side in (left, right)}
    names = (set(sizes[left]) | set(sizes[right])) - {MARKER}
    return sorted(
        name
        for name in names
        if name not in sizes[left]
        or name not in sizes[right]
        or not filecmp.cmp(left / name, right / name, shallow=False)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--runs", type=int, default=5000, help="runs of the generated export")
    parser.add_argument("--jobs", default="1,2", help="numbers of jobs, comma-separated")
    parser.add_argument("--without-denials", action="store_true",
                        help="leave out every run with an approval an operator denied")
    options = parser.parse_args()
    jobs = [int(count) for count in options.jobs.split(",")]
    lines = [f"| input | --jobs | files differing ({options.before} → {options.after}) |", "|---|---:|---:|"]
    differ = False
    with tempfile.TemporaryDirectory(prefix="nrllm-same-site-") as scratch:
        work = Path(scratch)
        tools = [checkout(revision, work / f"tool-{index}") for index, revision in enumerate((options.before,
                                                                                               options.after))]
        try:
            sample = tools[0] / "sample_data"
            servers = ",".join((sample / "servers.txt").read_text(encoding="utf-8").split())
            sources = [sample / "runs.jsonl", run.export(options.runs, run.SEED)]
            if options.without_denials:
                sources = [without_denials(source, work / f"without-denials-{index}.jsonl")
                           for index, source in enumerate(sources)]
            inputs = {
                "the bundled sample": [str(sources[0]), "--servers", servers],
                f"{options.runs:,} generated runs": [str(sources[1])],
            }
            if not options.without_denials:
                events, tables = whole_run.exports(options.runs, run.SEED)
                sample_tables = [str(path) for path in sorted(sample.glob("tx_*.jsonl"))]
                inputs["the bundled sample, whole run"] = [str(sources[0]), *sample_tables, "--servers", servers]
                inputs[f"{options.runs:,} generated runs, whole run"] = [str(events), *map(str, tables)]
            for number, (name, arguments) in enumerate(inputs.items()):
                for count in jobs:
                    # A folder of its own for every build: a rebuild's retired site is removed in the background.
                    sites = [work / f"site-{number}-{count}-{index}" for index in range(2)]
                    for tool, site in zip(tools, sites):
                        build(tool, arguments, site, count)
                    found = differing_files(*sites)
                    differ = differ or bool(found)
                    lines.append(f"| {name} | {count} | {len(found)}{': ' + ', '.join(found[:5]) if found else ''} |")
        finally:
            for tool in tools:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tool)], check=False)
    print("\n".join(lines))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
