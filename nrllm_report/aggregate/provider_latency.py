"""The providers' latency (issue 23): per ``provider/model`` that served the calls, from the telemetry
table's ``latency_ms`` of the provider calls of the export's runs (``WholeRuns.calls``). The same
figures as a server's (``aggregate.latency``): a successful call is ok, an unsuccessful one failed,
a call without ``success`` states no outcome; judged against the default latency budget."""

from __future__ import annotations

import pyarrow as pa

from ..core.model import Outcome
from .figures import local_days
from .latency import Latency, LatencySettings, latency_figures
from .whole_run import CallRow, WholeRuns


def provider_key(call: CallRow) -> str | None:
    """``provider/model`` of who served the call (the requested ones where the row names no other)."""
    provider, model = call.served_provider or call.provider, call.served_model or call.model
    return None if not provider and not model else f"{provider or ''}/{model or ''}"


def _outcome(call: CallRow) -> str | None:
    if call.success is None:
        return None
    return Outcome.OK.value if call.success else Outcome.FAILED.value


def provider_latencies(whole: WholeRuns, *, settings: LatencySettings, timezone_name: str) -> dict[str, Latency]:
    """Each ``provider/model``'s latency figures, by key."""
    columns: dict[str, tuple[list[float], list[str | None], list[int | None]]] = {}
    for calls in whole.calls.values():
        for call in calls:
            key = provider_key(call)
            if key is None:
                continue
            durations, outcomes, moments = columns.setdefault(key, ([], [], []))
            durations.append(float(call.latency_ms or 0))
            outcomes.append(_outcome(call))
            moments.append(call.crdate)
    figures = {}
    for key in sorted(columns):
        durations, outcomes, moments = columns[key]
        days = local_days(pa.chunked_array([pa.array(moments, pa.int64())]), timezone_name)
        figures[key] = latency_figures(pa.array(durations, pa.float64()), pa.array(outcomes, pa.string()),
                                       days=days.combine_chunks(), settings=settings)
    return figures
