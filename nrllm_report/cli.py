"""The command line: parses options and calls one pipeline function each. No logic here."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from . import __version__, pipeline
from .core.errors import EXIT_DATA, EXIT_OK, ReportError
from .core.interrupts import Interrupted
from .core.model import Problem, Severity
from .core.options import (
    DEFAULT_CALL_TIMEOUT_SECONDS,
    DEFAULT_CHANGE_WINDOW,
    DEFAULT_FAILURE_BUDGET,
    DEFAULT_LATENCY_BUDGET_SECONDS,
    DEFAULT_MIN_CALLS,
    DEFAULT_PASSWORD_ENV,
    DEFAULT_SLOW_BUDGET,
    DEFAULT_TABLE_PREFIX,
    GATE_CHANGES,
    GATE_VERDICTS,
    LANGUAGES,
    TIMELINE_FORMATS,
    database_urls,
    default_jobs,
    parse_failure_budgets,
    parse_latency_budgets,
    timeline_format,
)
from .core.workers import WorkerFailed

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar  # the type click.progressbar returns


def INPUTS(command: Callable[..., None]) -> Callable[..., None]:  # noqa: N802 (used as the decorator it was)
    """INPUT... and ``--db URL`` (with ``--db-env VAR``, ``--db-prefix PREFIX``), given to the command
    as one ``inputs``."""

    @functools.wraps(command)
    def with_databases(*args: Any, db: tuple[str, ...], db_env: str | None, db_prefix: str | None,
                       **kwargs: Any) -> None:
        kwargs["inputs"] = tuple(kwargs["inputs"]) + database_urls(db, password_env=db_env, prefix=db_prefix)
        command(*args, **kwargs)

    with_databases = click.option(
        "--db-prefix", "db_prefix", default=None, metavar="PREFIX",
        help=f"The prefix of nr-llm's table names in the database [default: {DEFAULT_TABLE_PREFIX}, "
             f"as in {DEFAULT_TABLE_PREFIX}nrllm_agentrun_event].",
    )(with_databases)
    with_databases = click.option(
        "--db-env", "db_env", default=None, metavar="VAR",
        help=f"The environment variable holding the database's password, or its whole URL with the password "
             f"(then --db may be left out) [default: {DEFAULT_PASSWORD_ENV}].",
    )(with_databases)
    with_databases = click.option(
        "--db", "db", multiple=True, metavar="URL",
        help="Read nr-llm's tables from a database: sqlite:///PATH, mysql://USER@HOST/DB, mariadb://, "
             "postgresql://USER@HOST/DB (never with a password: see --db-env).",
    )(with_databases)
    return click.argument("inputs", nargs=-1, metavar="[INPUT]...")(with_databases)
SERVERS = click.option(
    "--servers",
    default="",
    metavar="IDS",
    help="Known MCP server identifiers, comma-separated, so ids containing '_' resolve.",
)


def split_ids(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


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
    tally = pipeline.validate(list(inputs), split_ids(servers))
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
    tally = pipeline.normalize(list(inputs), out, known_servers=split_ids(servers))
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
    "--show-users", "--show-approvers", "show_approvers", is_flag=True,
    help="Show backend users' ids: who started a run and who decided an approval (by default only whether it "
         "was approved). --show-approvers is an alias.",
)
TIMEZONE = click.option("--timezone", "timezone_name", default="UTC", show_default=True,
                        callback=parse_timezone, help="The time zone every time is shown in.")


class TerminalProgress:
    """A progress bar on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.bar: ProgressBar[int] | None = None

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


def budgets_option(parse: Callable[[tuple[str, ...]], Any]) -> Callable[..., Any]:
    """A click callback of a budget option (``core.options.parse_budgets``' kind): its ValueError a usage error."""
    def callback(_context: click.Context, _parameter: click.Parameter, values: tuple[str, ...]) -> Any:
        try:
            return parse(values)
        except ValueError as error:
            raise click.BadParameter(str(error)) from None
    return callback


def parse_fail_on_change(_context: click.Context, _parameter: click.Parameter, value: str | None) -> tuple[str, ...]:
    changes = tuple(dict.fromkeys(split_ids(value or "")))
    if any(change not in GATE_CHANGES for change in changes):
        raise click.BadParameter(f"expected a comma-separated list of {', '.join(GATE_CHANGES)}, got {value!r}")
    return changes


def parse_fail_on(_context: click.Context, _parameter: click.Parameter, value: str) -> tuple[str, ...]:
    verdicts = tuple(dict.fromkeys(split_ids(value)))
    unknown = [verdict for verdict in verdicts if verdict not in GATE_VERDICTS]
    if unknown:
        raise click.BadParameter(
            f"expected a comma-separated list of {', '.join(GATE_VERDICTS)}, got {value!r}"
        )
    return verdicts


REPORT_FILE = click.Path(dir_okay=False, path_type=Path)
# The options build and gate share, in the order --help lists them.
SHARED_OPTIONS = (
    INPUTS,
    click.option("--lang", "languages", default="en,de", show_default=True, callback=parse_languages,
                 help="Languages to build, comma-separated; the Markdown summary is in the first."),
    TITLE,
    SERVERS,
    TIMEZONE,
    click.option("--min-calls", default=DEFAULT_MIN_CALLS, show_default=True, type=click.IntRange(min=1),
                 help="Ok or failed calls a server needs before it gets a verdict."),
    click.option("--failure-budget", "failure_budgets", multiple=True, callback=budgets_option(parse_failure_budgets),
                 metavar="RATE|SERVER=RATE",
                 help=f"The failure rate a server may have (default {DEFAULT_FAILURE_BUDGET}); repeat as "
                      "SERVER=RATE for one server's own."),
    click.option("--fail-on", "fail_on", default="", metavar="VERDICTS", callback=parse_fail_on,
                 help=f"Fail the gate (exit 1) for a server with one of these verdicts, comma-separated from "
                      f"{', '.join(GATE_VERDICTS)}."),
    click.option("--fail-on-change", "fail_on_change", default=None, metavar="CHANGES", callback=parse_fail_on_change,
                 help=f"Fail the gate for a server with such a change within the last --change-window days, "
                      f"comma-separated from {', '.join(GATE_CHANGES)} (worse: of the failure rate; slower: of "
                      "the slow share)."),
    click.option("--latency-budget", "latency_budgets", multiple=True, callback=budgets_option(parse_latency_budgets),
                 metavar="SECONDS|SERVER=SECONDS",
                 help=f"A call over this many seconds is slow (default {DEFAULT_LATENCY_BUDGET_SECONDS:g}); repeat "
                      "as SERVER=SECONDS for one server's own."),
    click.option("--slow-budget", default=DEFAULT_SLOW_BUDGET, show_default=True, type=click.FloatRange(0, 1),
                 metavar="RATE", help="The share of slow calls a server may have (its verdict is slow above it)."),
    click.option("--call-timeout", default=DEFAULT_CALL_TIMEOUT_SECONDS, show_default=True,
                 type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
                 help="The installation's MCP call timeout: calls within 5 % of it are near the timeout."),
    click.option("--change-window", default=DEFAULT_CHANGE_WINDOW, show_default=True, type=click.IntRange(min=1),
                 metavar="DAYS", help="The last days of the data in which a worse change fails the gate."),
    click.option("--junit", type=REPORT_FILE, default=None, metavar="FILE",
                 help="Write the gate as JUnit XML (one testcase per server) to FILE."),
    click.option("--markdown", type=REPORT_FILE, default=None, metavar="FILE",
                 help="Write a Markdown summary (gate, servers, changes, rejected rows) to FILE."),
    click.option("--archive", "archive", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 metavar="FILE", help="A Parquet file of runs kept from build to build: merged by run with the "
                 "inputs (an input's run wins); build replaces it by the merged runs when it succeeds, gate only "
                 "reads it."),
    click.option("--keep-days", type=click.IntRange(min=0), default=None, metavar="N",
                 help="Drop runs whose last step is more than N days older than the newest step in the data."),
    click.option("--strict", is_flag=True, help="Exit 1 when any row was rejected (the site is still written)."),
    click.option("--jobs", default=default_jobs(), show_default=True, type=click.IntRange(min=1),
                 help="Processes that check and render."),
    click.option("--timings", is_flag=True, help="Print the seconds each stage took, as JSON on stderr."),
)


def shared_options(command: Callable[..., None]) -> Callable[..., None]:
    """The one decorator stack of build's and gate's shared options."""
    for option in reversed(SHARED_OPTIONS):
        command = option(command)
    return command


def options_from(shared: dict[str, Any], force: bool = False) -> tuple[pipeline.BuildOptions, pipeline.ReportFiles]:
    """The build options and report files the shared options ask for."""
    default_budget, server_budgets = shared["failure_budgets"]
    latency_budget, latency_budgets = shared["latency_budgets"]
    changes = shared["fail_on_change"]
    options = pipeline.BuildOptions(
        languages=shared["languages"], title=shared["title"], timezone_name=shared["timezone_name"],
        known_servers=tuple(split_ids(shared["servers"])), min_calls=shared["min_calls"], force=force,
        jobs=shared["jobs"], failure_budget=default_budget, failure_budgets=server_budgets,
        gate=pipeline.GateOptions(shared["fail_on"], "worse" if "worse" in changes else None, shared["change_window"],
                                  fail_on_slower="slower" in changes),
        archive=shared["archive"], keep_days=shared["keep_days"], latency_budget=latency_budget,
        latency_budgets=latency_budgets, slow_budget=shared["slow_budget"], call_timeout=shared["call_timeout"],
    )
    return options, pipeline.ReportFiles(shared["junit"], shared["markdown"])


def exit_after_gate(gate: pipeline.GateResult, strict: bool, *, rows_rejected: int) -> None:
    """One line per failing server on stderr; exit 1 for a failed gate, or rejected rows with --strict."""
    for line in pipeline.gate_failure_lines(gate):
        click.echo(line, err=True)
    sys.exit(EXIT_DATA if not gate.passed or (strict and rows_rejected) else EXIT_OK)


@main.command()
@shared_options
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The folder the site is written to (replaced as a whole).")
@click.option("--force", is_flag=True, help="Replace --out even if it holds files this tool did not write.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="The input cache's folder [default: $XDG_CACHE_HOME/nrllm-report or ~/.cache/nrllm-report].")
@click.option("--no-cache", is_flag=True, help="Keep no input cache: every input is read and checked again.")
@SHOW_APPROVERS
def build(
    out: Path, force: bool, cache_dir: Path | None, no_cache: bool, show_approvers: bool, **shared: Any
) -> None:
    """Build the bilingual site. Without INPUT, builds the bundled sample (or, with --archive, the archive alone)."""
    options, reports = options_from(shared, force)
    options = replace(options, cache_dir=cache_dir, use_cache=not no_cache, show_approvers=show_approvers)
    archive: Path | None = shared["archive"]
    inputs: tuple[str, ...] = shared["inputs"]
    try:
        result = pipeline.build(list(inputs), out, options=options, progress=TerminalProgress(), reports=reports)
    except WorkerFailed as error:
        raise ReportError(f"{out}: the build stopped: {error.message}; the previous site is unchanged") from None
    except (Interrupted, KeyboardInterrupt) as error:
        stop = Interrupted.of(error)
        click.echo(f"Interrupted by {stop.name}: the previous site is unchanged"
                   + (" and so is the archive." if archive is not None else "."), err=True)
        sys.exit(stop.exit_code)
    data = result.data
    click.echo(
        f"Built {counted(len(data.summaries), 'run')} from {counted(data.rows_read, 'row')} "
        f"({data.rows_rejected} rejected) into {out}/ "
        f"({counted(result.pages_rendered, 'run page')} rendered, {result.pages_reused} reused).",
        err=True,
    )
    if shared["timings"]:
        click.echo(json.dumps({stage: round(seconds, 3) for stage, seconds in result.timings.items()}), err=True)
    exit_after_gate(data.gate, shared["strict"], rows_rejected=data.rows_rejected)


@main.command()
@shared_options
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="How to print the servers and the gate.")
def gate(output_format: str, **shared: Any) -> None:
    """Judge the servers as build does and apply the gate, without writing a site."""
    options, reports = options_from(shared)
    inputs: tuple[str, ...] = shared["inputs"]
    report = pipeline.gate(list(inputs), options, reports=reports)
    click.echo(pipeline.gate_output(report, output_format), nl=False)
    exit_after_gate(report.gate, shared["strict"], rows_rejected=report.rows_rejected)


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
@click.option("--cache-dir", "cache_folder", default=None, type=click.Path(file_okay=False, path_type=Path),
              metavar="DIR", help="The input cache build keeps (default: the user's cache folder): an input file it "
                                  "holds is not read again.")
@click.option("--no-cache", is_flag=True, help="Read every input, whatever the input cache holds.")
@SHOW_APPROVERS
def timeline(
    run: str, inputs: tuple[str, ...], out: Path, output_format: str | None, language: str, title: str | None,
    servers: str, timezone_name: str, cache_folder: Path | None, no_cache: bool, show_approvers: bool,
) -> None:
    """Write RUN's timeline as one self-contained HTML file, Markdown or JSON, to attach to a ticket."""
    options = pipeline.BuildOptions(
        languages=(language,), title=title, timezone_name=timezone_name, known_servers=tuple(split_ids(servers)),
        show_approvers=show_approvers, cache_dir=cache_folder, use_cache=not no_cache,
    )
    chosen = timeline_format(output_format, out.suffix)
    problems = pipeline.timeline(run, list(inputs), out=out, language=language, options=options,
                                 output_format=chosen)
    for problem in problems:
        click.echo(problem_line(problem), err=True)
    click.echo(f"Wrote the timeline of run {run!r} to {out}.", err=True)


class InputsOption(click.Option):
    """An option that takes every following argument up to the next option, and may repeat:
    ``--baseline a.jsonl b.jsonl``, as ``--baseline a.jsonl --baseline b.jsonl``. Its command is
    an ``InputsCommand``, which spells the arguments out so (click has no option of variable count)."""


class InputsCommand(click.Command):
    """A command with ``InputsOption`` options: before click parses the arguments, each one after such
    an option (up to the next option; ``-`` is standard input, not an option) gets the option's
    name before it. ``Command.parse_args`` is click's public hook for this."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        names = {name for parameter in self.params if isinstance(parameter, InputsOption) for name in parameter.opts}
        return super().parse_args(ctx, spelled_out(args, names))


def spelled_out(args: list[str], names: set[str]) -> list[str]:
    """``--baseline a b --format json`` as ``--baseline a --baseline b --format json`` (``names``
    the options that take every following argument; ``--`` ends the options)."""
    spelled: list[str] = []
    taking: str | None = None  # the option whose values these are
    own_value_next = False  # the argument next is the option's first value, which click reads itself
    for position, argument in enumerate(args):
        if argument == "--":
            return spelled + args[position:]
        if argument.startswith("-") and argument != "-":
            name = argument.split("=", 1)[0]
            taking = name if name in names else None
            own_value_next = taking is not None and "=" not in argument
            spelled.append(argument)
        elif taking is not None and not own_value_next:
            spelled += [taking, argument]
        else:
            own_value_next = False
            spelled.append(argument)
    return spelled


def one_stdin(baseline: tuple[str, ...], current: tuple[str, ...]) -> None:
    if "-" in baseline and "-" in current:
        raise click.UsageError("standard input (-) can be read by one side only, not by both")


@main.command(cls=InputsCommand)
@click.option("--baseline", cls=InputsOption, multiple=True, required=True, metavar="INPUT...",
              help="The exports to compare against (last week, staging, before an upgrade).")
@click.option("--current", cls=InputsOption, multiple=True, required=True, metavar="INPUT...",
              help="The exports to compare (this week, production, after an upgrade).")
@SERVERS
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True, help="How to print the comparison.")
@click.option("--fail-on-worse", is_flag=True, help="Exit 1 when any server is significantly worse.")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the comparison as Markdown to this file.")
@click.option("--lang", "languages", default="en,de", show_default=True, callback=parse_languages,
              help="Languages; the Markdown is written in the first.")
@TIMEZONE
def diff(
    baseline: tuple[str, ...], current: tuple[str, ...], servers: str, output_format: str, fail_on_worse: bool,
    markdown_file: Path | None, languages: tuple[str, ...], timezone_name: str,
) -> None:
    """Compare the servers' and tools' failure rates of two sets of exports."""
    one_stdin(baseline, current)
    pipeline.check_report_files(pipeline.ReportFiles(markdown=markdown_file))
    options = pipeline.BuildOptions(languages=languages, timezone_name=timezone_name,
                                    known_servers=tuple(split_ids(servers)), jobs=default_jobs())
    report = pipeline.diff(list(baseline), list(current), options=options)
    click.echo(pipeline.diff_output(report, output_format, options=options), nl=False)
    if markdown_file is not None:
        pipeline.write_report(markdown_file, pipeline.diff_output(report, "markdown", options=options))
    sys.exit(EXIT_DATA if fail_on_worse and report.diff.worse_servers else EXIT_OK)
