"""core/workers.py: forked work comes back in order, and no worker outlives the work, however it ends."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from multiprocessing import connection
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from nrllm_report.core.workers import WorkerFailed, forked_imap, forked_map

HANG_SECONDS = 30  # a test that would hang fails after this instead
BIG = 4_000_000  # bytes: a result far larger than a pipe holds, sent in many writes


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """Fail a test whose forked work hangs, instead of hanging the suite."""

    def hung(_signal: int, _frame: FrameType | None) -> None:
        raise TimeoutError(f"the forked work did not end within {HANG_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_SECONDS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended and been reaped (or is a zombie)."""
    try:
        return Path("/proc", str(pid), "stat").read_text().split(") ")[1][0] in "ZX"
    except (FileNotFoundError, IndexError):
        return True


def square_with_pid(offset: int, item: int) -> tuple[int, int]:
    return offset + item * item, os.getpid()


def test_results_come_back_in_item_order_from_several_workers() -> None:
    results = forked_map(square_with_pid, 1, items=list(range(40)), processes=2)

    assert [value for value, _pid in results] == [1 + item * item for item in range(40)]
    workers = {pid for _value, pid in results} - {os.getpid()}
    assert workers and all(gone(pid) for pid in workers)


def test_an_exception_in_a_worker_is_raised_here() -> None:
    def fail_on_three(_state: None, item: int) -> int:
        if item == 3:
            raise ValueError(f"no {item!r}")
        return item

    with pytest.raises(ValueError, match="no 3"):
        forked_map(fail_on_three, None, items=list(range(8)), processes=2)


def test_workers_end_when_the_caller_stops_early() -> None:
    results = forked_imap(square_with_pid, 0, items=list(range(40)), processes=2, ahead=4)
    pids = {next(results)[1], next(results)[1]}
    results.close()

    assert os.getpid() not in pids
    assert all(gone(pid) for pid in pids)


def test_a_worker_that_exits_fails_the_work_with_its_exit_code() -> None:
    def exit_on_two(_state: None, item: int) -> int:
        if item == 2:
            os._exit(70)
        return item

    with pytest.raises(WorkerFailed, match=r"ended with exit code 70"):
        forked_map(exit_on_two, None, items=list(range(8)), processes=2)


@pytest.mark.slow
def test_a_worker_killed_while_it_sends_a_result_fails_the_work_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the OOM killer may: half of a large result is in the pipe when the worker dies."""
    caller, send = os.getpid(), connection.Connection._send  # type: ignore[attr-defined]

    def send_half_then_die(self: connection.Connection, buffer: Any, *args: Any) -> None:
        if os.getpid() != caller and len(buffer) >= BIG:
            send(self, memoryview(buffer)[: len(buffer) // 2], *args)
            os.kill(os.getpid(), signal.SIGKILL)
        send(self, buffer, *args)

    monkeypatch.setattr(connection.Connection, "_send", send_half_then_die)

    def big_first(_state: None, item: int) -> bytes:
        return b"x" * (BIG if item == 0 else 10)

    with pytest.raises(WorkerFailed, match="SIGKILL"):
        forked_map(big_first, None, items=list(range(4)), processes=2)
