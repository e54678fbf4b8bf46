"""One base error for everything a user can cause; click prints it and exits with its code."""

from __future__ import annotations

import click

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2


class ReportError(click.ClickException):
    """A problem the user can fix, said in one line. Exit 1 unless a subclass says otherwise."""

    exit_code = EXIT_DATA


class InputError(ReportError):
    """An input that does not exist, has no known format, or cannot be read at all: exit 2."""

    exit_code = EXIT_USAGE

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class OutputError(ReportError):
    """An output folder or file the tool refuses to touch or cannot write: exit 2."""

    exit_code = EXIT_USAGE


class UnknownRunError(ReportError):
    """The run asked for is not in the input: exit 2."""

    exit_code = EXIT_USAGE


class ArchiveError(ReportError):
    """An ``--archive`` file that is not one this version can read: refused, left untouched, exit 2."""

    exit_code = EXIT_USAGE
