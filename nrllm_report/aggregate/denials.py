"""What the other tables say about a partition's steps (issue 20): the catalogue's servers and
which failed calls were denied. Pure: a steps table and ``ServerTruths`` in, a table out.

A denied call never reached its server: its outcome string stays ``failed`` (ADR-191 has
three outcomes), and the ``denial`` column says what explains it (``Denial``):

- ``operator``: the step right before it in its run is an ``approval`` with ``approved:
  false``, and it is a ``tool`` step that failed in 0 ms (nr-llm writes the denied call
  at resume, ``ToolLoopService``);
- ``policy``: a governance ``tool_denied`` decision of the same run and tool explains one
  failed call of that tool: the first not yet explained at or after the decision's time,
  else the nearest before it.

Where both rules explain a call it is the operator's: the two rules are applied apart, so
a policy decision may explain a call the operator denied as well. The steps are sorted by
run and sequence and hold whole runs, as a sweep's partition does; the rules look at the
whole table with Arrow's kernels, and only at the few rows of runs with a policy decision
in Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..core.model import APPROVAL_KIND, TOOL_KIND, Outcome
from ..core.schema import DENIAL_COLUMN
from ..core.tables import NO_TRUTHS, Denial, ServerTruths

__all__ = ["DENIAL_COLUMN", "DENIAL_TYPE", "denials", "with_catalogue_servers", "with_server_truths"]
DENIAL_TYPE = pa.string()
_NO_DENIAL = pa.scalar(None, DENIAL_TYPE)


def with_server_truths(steps: pa.Table, truths: ServerTruths = NO_TRUTHS) -> pa.Table:
    """The steps with the catalogue's server of each tool it knows, and a ``denial`` column
    (``Denial`` values, null for none) appended last; the other columns stay where they are."""
    steps = with_catalogue_servers(steps, truths.tool_servers)
    denial = denials(steps, truths)
    if DENIAL_COLUMN in steps.column_names:
        return steps.set_column(steps.column_names.index(DENIAL_COLUMN), DENIAL_COLUMN, denial)
    return steps.append_column(pa.field(DENIAL_COLUMN, DENIAL_TYPE), denial)


def with_catalogue_servers(steps: pa.Table, tool_servers: Mapping[str, str]) -> pa.Table:
    """The steps with ``server`` from the catalogue where it names the step's tool; a tool it
    lacks keeps the server the name rule (or ``--servers``) gave it."""
    if not tool_servers or steps.num_rows == 0:
        return steps
    tools = pa.array(list(tool_servers), pa.string())
    servers = pa.array(list(tool_servers.values()), pa.string())
    catalogued = pc.take(servers, pc.index_in(steps.column("toolName"), value_set=tools))
    position = steps.column_names.index("server")
    return steps.set_column(position, steps.schema.field(position), pc.coalesce(catalogued, steps.column("server")))


def denials(steps: pa.Table, truths: ServerTruths = NO_TRUTHS) -> pa.ChunkedArray:
    """Each step's denial: ``operator``, ``policy`` or null (see the module's rules)."""
    if steps.num_rows == 0:
        return pa.chunked_array([], DENIAL_TYPE)
    failed_tool = _failed_tool_calls(steps)
    operator = pc.and_(pc.and_(failed_tool, pc.equal(steps.column("durationMs"), 0.0)), _after_a_denied_approval(steps))
    policy = _policy_denied(steps, failed_tool, policy_denials=truths.policy_denials)
    denial = pc.if_else(operator, pa.scalar(Denial.OPERATOR.value, DENIAL_TYPE),
                        pc.if_else(policy, pa.scalar(Denial.POLICY.value, DENIAL_TYPE), _NO_DENIAL))
    return pa.chunked_array([denial]) if isinstance(denial, pa.Array) else denial


def _failed_tool_calls(steps: pa.Table) -> pa.Array:
    failed = pc.and_(pc.equal(steps.column("kind"), TOOL_KIND), pc.equal(steps.column("outcome"), Outcome.FAILED.value))
    return _combined(pc.fill_null(failed, False))


def _after_a_denied_approval(steps: pa.Table) -> pa.Array:
    """Whether the step right before each step is, in the same run, an approval with approved: false."""
    denied_approval = pc.fill_null(pc.and_(pc.equal(steps.column("kind"), APPROVAL_KIND),
                                           pc.equal(steps.column("approved"), False)), False)
    run = steps.column("run")
    same_run = pc.equal(run.slice(1), run.slice(0, steps.num_rows - 1))
    follows = pc.and_(_combined(denied_approval.slice(0, steps.num_rows - 1)), _combined(same_run))
    return pa.concat_arrays([pa.array([False]), _combined(pc.fill_null(follows, False))])


def _policy_denied(
    steps: pa.Table, failed_tool: pa.Array, *, policy_denials: Mapping[str, Sequence[tuple[str, int | None]]],
) -> pa.Array:
    """Whether a governance ``tool_denied`` decision explains each step (see the module)."""
    explained: list[int] = []
    if policy_denials:
        runs = pa.array(list(policy_denials), pa.string())
        candidate = pc.and_(failed_tool, pc.fill_null(pc.is_in(steps.column("run"), value_set=runs), False))
        rows = pc.indices_nonzero(candidate)
        if len(rows):
            picked = steps.select(["run", "toolName", "crdate"]).take(rows)
            calls: dict[tuple[str, str], list[tuple[int, int | None]]] = {}
            for row, run, tool, crdate in zip(rows.to_pylist(), *(picked.column(name).to_pylist()
                                                                for name in ("run", "toolName", "crdate"))):
                calls.setdefault((run, tool), []).append((row, crdate))
            explained = _explained_rows(calls, policy_denials)
    if not explained:
        return pa.repeat(pa.scalar(False), steps.num_rows)
    positions = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), steps.num_rows)), 1)
    return pc.is_in(positions, value_set=pa.array(explained, pa.int64()))


def _explained_rows(
    calls: dict[tuple[str, str], list[tuple[int, int | None]]],
    policy_denials: Mapping[str, Sequence[tuple[str, int | None]]],
) -> list[int]:
    """The rows the decisions explain: per run and tool, the decisions in time order, each
    taking the first unexplained call at or after its time, else the nearest one before."""
    explained: list[int] = []
    for run, decisions in policy_denials.items():
        for tool, decided in sorted(decisions, key=lambda decision: (decision[1] is None, decision[1] or 0)):
            open_calls = calls.get((run, tool))
            if not open_calls:
                continue
            chosen = _chosen_call(open_calls, decided)
            explained.append(open_calls.pop(chosen)[0])
    return explained


def _chosen_call(open_calls: list[tuple[int, int | None]], decided: int | None) -> int:
    """The position (in ``open_calls``, in sequence order) of the call a decision at ``decided`` explains."""
    if decided is None:
        return 0
    at_or_after = [position for position, (_row, crdate) in enumerate(open_calls)
                   if crdate is not None and crdate >= decided]
    if at_or_after:
        return at_or_after[0]
    before = [(crdate, position) for position, (_row, crdate) in enumerate(open_calls) if crdate is not None]
    return max(before)[1] if before else 0


def _combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
