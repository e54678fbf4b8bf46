"""The signals that end a command (SIGINT, SIGTERM, SIGHUP), raised as one exception in its main process.

Only the standard library is imported here: ``python -m nrllm_report`` installs the handlers
before anything slow (click, pyarrow) is imported, so that a signal during start-up ends the
command as one later does, with one line and the shell's exit code (128 + the signal).
"""

from __future__ import annotations

import os
import signal
from types import FrameType

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SIGNAL_EXIT_BASE = 128


class Interrupted(BaseException):
    """A signal asked this process to stop.

    A BaseException, as KeyboardInterrupt is, so that no ``except Exception`` swallows it and
    every ``finally`` and ``with`` cleans up on the way out; not a KeyboardInterrupt, so that
    click does not turn it into "Aborted!" and exit 1.
    """

    def __init__(self, signal_number: int) -> None:
        super().__init__(signal_number)
        self.signal_number = signal_number

    @classmethod
    def of(cls, error: BaseException) -> Interrupted:
        """``error`` as an Interrupted: a KeyboardInterrupt (no handler installed) is SIGINT's."""
        return error if isinstance(error, Interrupted) else cls(signal.SIGINT)

    @property
    def name(self) -> str:
        return signal.Signals(self.signal_number).name

    @property
    def exit_code(self) -> int:
        return SIGNAL_EXIT_BASE + self.signal_number


def stop_on_signals() -> None:
    """Make each stopping signal raise Interrupted in this process, once.

    A signal this process was started ignoring (``nohup`` ignores SIGHUP) stays ignored. Once
    one has arrived, the others are ignored, so that a second Ctrl-C cannot cut the clean-up
    short. A process forked from this one that receives a signal before it sets its own
    handlers exits at once with the signal's code instead of raising in code not its own.
    """
    owner = os.getpid()

    def stop(signal_number: int, _frame: FrameType | None) -> None:
        if os.getpid() != owner:
            os._exit(SIGNAL_EXIT_BASE + signal_number)
        for each in STOPPING_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        raise Interrupted(signal_number)

    for signal_number in STOPPING_SIGNALS:
        if signal.getsignal(signal_number) is not signal.SIG_IGN:
            signal.signal(signal_number, stop)
