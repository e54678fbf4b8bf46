"""Work in forked processes, each worker handed its state explicitly.

A forked worker shares the parent's memory as it was at the fork, so a large
state (tables, page kits, a site writer) reaches it without pickling. The state
is passed to the worker as an argument, never left in a module global: only the
items and the results travel through pipes.

A worker ends with the build, however the build ends: stopped by this process when
the build stops (a result, a failure, a signal), and killed by the kernel when this
process dies without stopping it (SIGKILL), so that no worker outlives the build
holding its locks and its caller's pipes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing import connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, NoReturn, TypeVar

import pyarrow as pa

from .errors import ReportError

State = TypeVar("State")
Item = TypeVar("Item")
Result = TypeVar("Result")

FORK = multiprocessing.get_context("fork")
POLL_SECONDS = 0.2
STOP_SECONDS = 1.0  # a stopped worker still there after this is killed
PR_SET_PDEATHSIG = 1  # linux/prctl.h
_DONE = None


class WorkerFailed(ReportError):
    """A worker process ended before finishing its work (it crashed, or was killed): exit 1."""


class WorkerError(RuntimeError):
    """A worker raised something that cannot travel back as itself; its traceback as text."""


def forked_map(
    work: Callable[[State, Item], Result], state: State, *, items: Sequence[Item], processes: int,
    on_wait: Callable[[], None] | None = None,
) -> list[Result]:
    """``[work(state, item) for item in items]``, in up to ``processes`` forked workers.

    ``on_wait`` is called while waiting for results (to report progress, say).
    """
    return list(forked_imap(work, state, items=items, processes=processes, ahead=len(items), on_wait=on_wait))


def forked_imap(
    work: Callable[[State, Item], Result], state: State, *, items: Sequence[Item], processes: int,
    ahead: int, on_wait: Callable[[], None] | None = None,
) -> Iterator[Result]:
    """``work(state, item)`` for each item in forked workers, yielded in the order of ``items``.

    At most ``ahead`` items are handed out beyond the one yielded next, so that results do
    not pile up while the caller works on them. Results come in item order, so nothing
    depends on the number of processes. However this generator ends (its last result,
    an exception here or in a worker, a signal, being closed), its workers are ended
    before it returns; a worker that ends on its own first is a WorkerFailed here.
    """
    count = min(processes, len(items))
    if count <= 1:
        yield from (work(state, item) for item in items)
        return
    free_memory_returned()
    tasks: Any = FORK.Queue()
    workers: list[Any] = []
    results: dict[Any, Any] = {}  # the reading end of each worker's own pipe -> the worker
    finished = False
    try:
        for _ in range(count):
            reader, worker = _start_worker(work, state, tasks=tasks)
            workers.append(worker)
            results[reader] = worker
        yield from _hand_out(items, tasks, results=results, ahead=max(ahead, count), on_wait=on_wait)
        finished = True
    finally:
        if not finished:
            tasks.cancel_join_thread()  # no worker will read what is left: do not wait to send it
        _stop(workers)
        for reader in results:
            reader.close()


def free_memory_returned() -> None:
    """Arrow's memory pool gives the system back what it holds free: before workers fork, and in a
    worker after each item (and each partition a render worker takes).

    mimalloc keeps freed pages for reuse: after the check, the build's process held some 200 MB
    more than it used (VmRSS 410-460 MB, 200 MB once returned), and each forked worker's
    allocator reused, and so copied, those pages as its own."""
    pa.default_memory_pool().release_unused()


def _start_worker(work: Callable[[Any, Any], Any], state: Any, *, tasks: Any) -> tuple[Any, Any]:
    """A started worker and the reading end of the pipe its results come through.

    The pipe is the worker's alone: this process closes its writing end once the worker
    has it (so no later worker inherits it), and the reader sees the end of the file as
    soon as the worker ends, even part-way through a result.
    """
    reader, writer = FORK.Pipe(duplex=False)
    worker = FORK.Process(target=_serve, args=(work, state),
                          kwargs={"tasks": tasks, "results": writer, "parent": os.getpid()}, daemon=True)
    try:
        worker.start()
    except BaseException:
        reader.close()
        raise
    finally:
        writer.close()
    return reader, worker


def _stop(workers: list[Any]) -> None:
    """End every worker: ask with SIGTERM, then kill one still there after STOP_SECONDS."""
    started = [worker for worker in workers if worker.pid is not None]
    for worker in started:
        if worker.is_alive():
            worker.terminate()
    for worker in started:
        worker.join(STOP_SECONDS)
        if worker.is_alive():
            worker.kill()
            worker.join()


def _hand_out(
    items: Sequence[Any], tasks: Any, *, results: dict[Any, Any], ahead: int, on_wait: Callable[[], None] | None,
) -> Iterator[Any]:
    handed = 0
    waiting: dict[int, Any] = {}
    for wanted in range(len(items)):
        while handed < len(items) and handed <= wanted + ahead:
            tasks.put((handed, items[handed]))
            handed += 1
        while wanted not in waiting:
            waiting.update(_next_results(results, on_wait))
        yield waiting.pop(wanted)
    for _ in results:
        tasks.put(_DONE)


def _next_results(results: dict[Any, Any], on_wait: Callable[[], None] | None) -> Iterator[tuple[int, Any]]:
    """The results ready now, as (index, value); a worker's failure is raised here."""
    ready = connection.wait(list(results), timeout=POLL_SECONDS)
    if not ready and on_wait is not None:
        on_wait()
    for reader in ready:
        assert isinstance(reader, connection.Connection)  # wait() was given the workers' pipes only
        try:
            index, succeeded, value = ForkingPickler.loads(reader.recv_bytes())
        except (EOFError, OSError):  # the worker ended, maybe part-way through a result
            _raise_ended(results[reader])
        if not succeeded:
            raise value
        yield index, value


def _raise_ended(worker: Any) -> NoReturn:
    """Raise WorkerFailed for a worker that ended before its work did, naming how it ended."""
    worker.join(STOP_SECONDS)
    code = worker.exitcode
    if code is None:
        how = "closed its pipe"
    elif code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
    else:
        how = f"ended with exit code {code}"
    raise WorkerFailed(f"a worker process (pid {worker.pid}) {how} before finishing its work")


def _serve(work: Callable[[Any, Any], Any], state: Any, *, tasks: Any, results: Any, parent: int) -> None:
    _become_worker(parent)
    outbox: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
    sender = threading.Thread(target=_send_all, args=(outbox, results), daemon=True)
    sender.start()
    while (task := tasks.get()) is not _DONE:
        index, item = task
        try:
            message = ForkingPickler.dumps((index, True, work(state, item)))
        except BaseException as error:  # noqa: BLE001 - every failure travels back to the parent
            message = ForkingPickler.dumps((index, False, _portable(error)))
        outbox.put(message)
        free_memory_returned()  # what the item's tables took, before the next item's
    outbox.put(_DONE)
    sender.join()
    results.close()


def _send_all(outbox: queue.SimpleQueue[memoryview | None], results: Any) -> None:
    """Send the worker's results while it goes on with its next item, as a multiprocessing queue does."""
    while (message := outbox.get()) is not _DONE:
        results.send_bytes(message)


def _become_worker(parent: int) -> None:
    """Leave Ctrl-C and hang-ups to the parent, which stops the workers; end on SIGTERM; die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not _killed_with_parent():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before this worker could ask to be told
        os._exit(1)


def _killed_with_parent() -> bool:
    """On Linux, have the kernel send SIGKILL to this process when its parent ends; False elsewhere.

    The kernel takes the parent to be the thread that forked: workers are forked by the main thread.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0


def _watch_parent(parent: int) -> None:
    """Where the kernel cannot be asked: end this worker within POLL_SECONDS of its parent's end."""
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os._exit(1)


def _portable(error: BaseException) -> BaseException:
    """``error`` itself when it survives pickling, else a WorkerError with its traceback."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - any failure to pickle means: send text instead
        return WorkerError("".join(traceback.format_exception(error)))


@contextlib.contextmanager
def long_lived_objects() -> Iterator[Callable[[], None]]:
    """Pause the cyclic garbage collector while a build makes the objects it keeps to its end;
    the caller calls what this yields once they are made, before workers fork.

    A build holds millions of small acyclic objects until it ends (run summaries, the whole
    runs' rows, page texts); each collection would walk all of them again, and in a forked
    worker, touching them copies every page they live on. Calling the yielded function
    freezes what exists (``gc.freeze``: never walked again) and lets the collector run on
    what comes after; leaving unfreezes it and restores the collector as it was.
    """
    enabled = gc.isenabled()
    gc.disable()

    def made() -> None:
        gc.freeze()
        if enabled:
            gc.enable()

    try:
        yield made
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
