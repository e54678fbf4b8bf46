"""The command line: parses options and calls one pipeline function each. No logic here."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import BinaryIO, TextIO

import click

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import __version__
from . import pipeline
from .core.errors import EXIT_DATA, EXIT_OK
from .core.options import (
    DEFAULT_FAILURE_BUDGET, DEFAULT_MIN_CALLS, LANGUAGES, TIMELINE_FORMATS, default_jobs, timeline_format,
)
from .core.model import Problem, Severity

INPUTS = click.argument("inputs", nargs=-1, metavar="[INPUT]...")
SERVERS = click.option(
    "--servers",
    default="",
    metavar="IDS",
    help="Known MCP server identifiers, comma-separated, so ids containing '_' resolve.",
)


def split_ids(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def stdin_if_needed(inputs: tuple[str, ...]) -> BinaryIO | None:
    # click.get_binary_stream is deprecated since Click 8.5; sys.stdin.buffer is what it returned.
    return getattr(sys.stdin, "buffer", None) if "-" in inputs else None


def problem_line(problem: Problem) -> str:
    return f"{problem.input}:{problem.row}: {problem.rule.value}: {problem.text()}"


def print_problems(tally: pipeline.CheckedRows, stream: TextIO) -> None:
    for problem in tally.problems:
        click.echo(problem_line(problem), file=stream)
    warnings = sum(1 for problem in tally.problems if problem.severity is Severity.WARNING)
    click.echo(
        f"{counted(tally.rows_read, 'row')} read: {tally.rows_valid} valid, "
        f"{tally.rows_rejected} rejected, {counted(warnings, 'warning')}.",
        file=stream,
    )


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nrllm-report")
def main() -> None:
    """Turn nr-llm agent-run exports into a bilingual static website.

    INPUT is a .json, .jsonl, .ndjson, .csv or .tsv file (optionally .gz), a
    .parquet file, a folder of Parquet files, or - for JSON Lines on standard input.
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


def parse_languages(_context: click.Context, _parameter: click.Parameter, value: str) -> tuple[str, ...]:
    languages = tuple(dict.fromkeys(split_ids(value)))
    unknown = [language for language in languages if language not in LANGUAGES]
    if not languages or unknown:
        raise click.BadParameter(
            f"expected a comma-separated list of {', '.join(LANGUAGES)}, got {value!r}"
        )
    return languages


def parse_timezone(_context: click.Context, _parameter: click.Parameter, value: str) -> str:
    if value == "UTC":
        return value
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"{value!r} is not a time zone name such as UTC or Europe/Berlin") from None
    return value


TITLE = click.option("--title", default=None, help="The report's title, shown on every page.")
SHOW_APPROVERS = click.option(
    "--show-approvers", is_flag=True,
    help="Show who decided an approval (a backend user's id); by default only whether it was approved.",
)
TIMEZONE = click.option("--timezone", "timezone_name", default="UTC", show_default=True,
                        callback=parse_timezone, help="The time zone every time is shown in.")


class TerminalProgress:
    """A progress bar on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.bar = None

    def start(self, total: int) -> None:
        if total and sys.stderr.isatty():
            self.bar = click.progressbar(length=total, label="Rendering run pages", file=sys.stderr)
            self.bar.__enter__()

    def advance(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def parse_failure_budgets(
    context: click.Context, parameter: click.Parameter, values: tuple[str, ...]
) -> tuple[float, tuple[tuple[str, float], ...]]:
    """``--failure-budget`` given as RATE (the default) and SERVER=RATE (one server's), each a rate in [0, 1]."""
    default = DEFAULT_FAILURE_BUDGET
    per_server: dict[str, float] = {}
    for value in values:
        server, _, rate_text = value.rpartition("=")
        try:
            rate = float(rate_text)
        except ValueError:
            rate = math.nan
        if not 0.0 <= rate <= 1.0 or (server == "" and "=" in value):
            raise click.BadParameter(f"{value!r} is not a rate from 0 to 1 (RATE or SERVER=RATE, e.g. 0.05)")
        if server:
            per_server[server] = rate
        else:
            default = rate
    return default, tuple(sorted(per_server.items()))


@main.command()
@INPUTS
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The folder the site is written to (replaced as a whole).")
@click.option("--lang", "languages", default="en,de", show_default=True, callback=parse_languages,
              help="Languages to build, comma-separated.")
@TITLE
@SERVERS
@TIMEZONE
@click.option("--min-calls", default=DEFAULT_MIN_CALLS, show_default=True, type=click.IntRange(min=1),
              help="Ok or failed calls a server needs before it gets a verdict.")
@click.option("--failure-budget", "failure_budgets", multiple=True, callback=parse_failure_budgets,
              metavar="RATE|SERVER=RATE",
              help=f"The failure rate a server may have (default {DEFAULT_FAILURE_BUDGET}); repeat as SERVER=RATE "
                   "for one server's own.")
@click.option("--strict", is_flag=True, help="Exit 1 when any row was rejected (the site is still written).")
@click.option("--force", is_flag=True, help="Replace --out even if it holds files this tool did not write.")
@click.option("--jobs", default=default_jobs(), show_default=True, type=click.IntRange(min=1),
              help="Processes that render run pages.")
@click.option("--timings", is_flag=True, help="Print the seconds each stage took, as JSON on stderr.")
@SHOW_APPROVERS
def build(
    inputs: tuple[str, ...], out: Path, languages: tuple[str, ...], title: str | None, servers: str,
    timezone_name: str, min_calls: int, failure_budgets: tuple[float, tuple[tuple[str, float], ...]], strict: bool,
    force: bool, jobs: int, timings: bool, show_approvers: bool,
) -> None:
    """Build the bilingual site. Without INPUT, builds the bundled sample."""
    default_budget, server_budgets = failure_budgets
    options = pipeline.BuildOptions(
        languages=languages, title=title, timezone_name=timezone_name,
        known_servers=tuple(split_ids(servers)), min_calls=min_calls, force=force, jobs=jobs,
        failure_budget=default_budget, failure_budgets=server_budgets,
        show_approvers=show_approvers,
    )
    try:
        result = pipeline.build(list(inputs), out, options, stdin_if_needed(inputs), TerminalProgress())
    except KeyboardInterrupt:
        click.echo("Interrupted: the previous site is unchanged.", err=True)
        sys.exit(130)
    data = result.data
    click.echo(
        f"Built {counted(len(data.summaries), 'run')} from {counted(data.rows_read, 'row')} "
        f"({data.rows_rejected} rejected) into {out}/ "
        f"({counted(result.pages_rendered, 'run page')} rendered, {result.pages_reused} reused).",
        err=True,
    )
    if timings:
        click.echo(json.dumps({stage: round(seconds, 3) for stage, seconds in result.timings.items()}), err=True)
    sys.exit(EXIT_DATA if strict and data.rows_rejected else EXIT_OK)


@main.command()
@click.argument("run")
@INPUTS
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The .html, .md or .json file to write.")
@click.option("--format", "output_format", type=click.Choice(list(TIMELINE_FORMATS)), default=None,
              help="html (one self-contained page), md (Markdown for a ticket) or json (the canonical steps); "
                   "by default from the --out suffix, else html.")
@click.option("--lang", "language", type=click.Choice(list(LANGUAGES)), default="en", show_default=True)
@TITLE
@SERVERS
@TIMEZONE
@SHOW_APPROVERS
def timeline(
    run: str, inputs: tuple[str, ...], out: Path, output_format: str | None, language: str, title: str | None,
    servers: str, timezone_name: str, show_approvers: bool,
) -> None:
    """Write RUN's timeline as one self-contained HTML file, Markdown or JSON, to attach to a ticket."""
    options = pipeline.BuildOptions(
        languages=(language,), title=title, timezone_name=timezone_name,
        known_servers=tuple(split_ids(servers)), show_approvers=show_approvers,
    )
    chosen = timeline_format(output_format, out.suffix)
    problems = pipeline.timeline(run, list(inputs), out, language, options, stdin_if_needed(inputs), chosen)
    for problem in problems:
        click.echo(problem_line(problem), err=True)
    click.echo(f"Wrote the timeline of run {run!r} to {out}.", err=True)
