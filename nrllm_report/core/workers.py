"""Work in forked processes, each worker handed its state explicitly.

A forked worker shares the parent's memory as it was at the fork, so a large
state (tables, page kits, a site writer) reaches it without pickling. The state
is passed to the worker as an argument, never left in a module global: only the
items and the results travel through pipes.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import signal
import traceback
from typing import Any, Callable, Iterator, Sequence, TypeVar

State = TypeVar("State")
Item = TypeVar("Item")
Result = TypeVar("Result")

FORK = multiprocessing.get_context("fork")
POLL_SECONDS = 0.2
_DONE = None


class WorkerFailed(RuntimeError):
    """A worker died or raised something that cannot travel back as itself."""


def forked_map(
    work: Callable[[State, Item], Result], state: State, items: Sequence[Item], processes: int,
    on_wait: Callable[[], None] | None = None,
) -> list[Result]:
    """``[work(state, item) for item in items]``, in up to ``processes`` forked workers.

    ``on_wait`` is called while waiting for results (to report progress, say).
    """
    return list(forked_imap(work, state, items, processes, len(items), on_wait))


def forked_imap(
    work: Callable[[State, Item], Result], state: State, items: Sequence[Item], processes: int,
    ahead: int, on_wait: Callable[[], None] | None = None,
) -> Iterator[Result]:
    """``work(state, item)`` for each item in forked workers, yielded in the order of ``items``.

    At most ``ahead`` items are handed out beyond the one yielded next, so that results do
    not pile up while the caller works on them. Results come in item order, so nothing
    depends on the number of processes. Workers ignore Ctrl-C and leave it to this
    process, which stops them; an exception raised in a worker is raised here.
    """
    count = min(processes, len(items))
    if count <= 1:
        yield from (work(state, item) for item in items)
        return
    tasks: Any = FORK.Queue()
    results: Any = FORK.Queue()
    workers = [FORK.Process(target=_serve, args=(work, state, tasks, results), daemon=True) for _ in range(count)]
    for worker in workers:
        worker.start()
    try:
        yield from _hand_out(items, tasks, results, workers, max(ahead, count), on_wait)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()


def _hand_out(
    items: Sequence[Any], tasks: Any, results: Any, workers: list[Any], ahead: int,
    on_wait: Callable[[], None] | None,
) -> Iterator[Any]:
    handed = 0
    waiting: dict[int, Any] = {}
    for wanted in range(len(items)):
        while handed < len(items) and handed <= wanted + ahead:
            tasks.put((handed, items[handed]))
            handed += 1
        while wanted not in waiting:
            index, value = _next_result(results, workers, on_wait)
            waiting[index] = value
        yield waiting.pop(wanted)
    for _ in workers:
        tasks.put(_DONE)


def _next_result(results: Any, workers: list[Any], on_wait: Callable[[], None] | None) -> tuple[int, Any]:
    while True:
        try:
            index, succeeded, value = results.get(timeout=POLL_SECONDS)
        except queue.Empty:
            if on_wait is not None:
                on_wait()
            if any(worker.exitcode not in (None, 0) for worker in workers):
                raise WorkerFailed("a worker process stopped before finishing its work") from None
            continue
        if not succeeded:
            raise value
        return index, value


def _serve(work: Callable[[Any, Any], Any], state: Any, tasks: Any, results: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while (task := tasks.get()) is not _DONE:
        index, item = task
        try:
            results.put((index, True, work(state, item)))
        except BaseException as error:  # noqa: BLE001 - every failure travels back to the parent
            results.put((index, False, _portable(error)))
    results.close()
    results.join_thread()


def _portable(error: BaseException) -> BaseException:
    """``error`` itself when it survives pickling, else a WorkerFailed with its traceback."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - any failure to pickle means: send text instead
        return WorkerFailed("".join(traceback.format_exception(error)))
