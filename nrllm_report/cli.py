"""The command line: parses options and calls one pipeline function each. No logic here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

import click

from . import __version__, pipeline
from .errors import EXIT_DATA, EXIT_OK
from .model import Severity

INPUTS = click.argument("inputs", nargs=-1, metavar="[INPUT]...")
SERVERS = click.option(
    "--servers",
    default="",
    metavar="IDS",
    help="Known MCP server identifiers, comma-separated, so ids containing '_' resolve.",
)


def split_ids(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def stdin_if_needed(inputs: tuple[str, ...]):  # type: ignore[no-untyped-def]
    return click.get_binary_stream("stdin") if "-" in inputs else None


def print_problems(tally: pipeline.CheckedRows, stream: TextIO) -> None:
    for problem in tally.problems:
        click.echo(f"{problem.input}:{problem.row}: {problem.rule.value}: {problem.text()}", file=stream)
    warnings = sum(1 for problem in tally.problems if problem.severity is Severity.WARNING)
    click.echo(
        f"{tally.rows_read} rows read: {tally.rows_valid} valid, "
        f"{tally.rows_rejected} rejected, {warnings} warnings.",
        file=stream,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nrllm-report")
def main() -> None:
    """Turn nr-llm agent-run exports into a bilingual static website.

    INPUT is a .json, .jsonl or .ndjson file (optionally .gz), a .parquet file,
    a folder of Parquet files, or - for JSON Lines on standard input.
    """


@main.command()
@INPUTS
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="How to print the problems.")
@SERVERS
def validate(inputs: tuple[str, ...], output_format: str, servers: str) -> None:
    """Check every row; exit 1 when any row has an error."""
    if not inputs:
        raise click.UsageError("give at least one INPUT (a file, a folder, or - for stdin)")
    tally = pipeline.validate(list(inputs), split_ids(servers), stdin_if_needed(inputs))
    if output_format == "json":
        click.echo(json.dumps(tally.to_json(), ensure_ascii=False, indent=2))
    else:
        print_problems(tally, sys.stdout)
    sys.exit(EXIT_DATA if tally.has_errors else EXIT_OK)


@main.command()
@INPUTS
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The .jsonl or .parquet file to write.")
@SERVERS
def normalize(inputs: tuple[str, ...], out: Path, servers: str) -> None:
    """Write every row without an error as a canonical record."""
    if not inputs:
        raise click.UsageError("give at least one INPUT (a file, a folder, or - for stdin)")
    tally = pipeline.normalize(list(inputs), out, split_ids(servers), stdin_if_needed(inputs))
    print_problems(tally, sys.stderr)
    sys.exit(EXIT_DATA if tally.has_errors else EXIT_OK)
