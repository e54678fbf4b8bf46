"""The rule codes: every raw row becomes a canonical Step or a Problem, never both, never neither.

Rules are checked in the order of ``Rule``; a rejected row gets the first that
applies. Warnings are added only to rows that are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..core.model import KNOWN_KINDS, N_, TOOL_KIND, Outcome, Problem, Rule, Unreadable
from ..core.schema import COLUMN_SPELLINGS, FLATTENED_KEYS, Step
from . import normalize as n

OUTCOME_VALUES = frozenset(outcome.value for outcome in Outcome)
REQUIRED_COLUMNS = ("run", "sequence", "kind")


class RowRejected(Exception):
    """Raised inside the checker only, to stop at the first rule a row breaks."""

    def __init__(self, rule: Rule, message: str, **params: Any) -> None:
        super().__init__(rule.value)
        self.rule = rule
        self.message = message
        self.params = tuple((key, str(value)) for key, value in params.items())


@dataclass(frozen=True, slots=True)
class RowResult:
    step: Step | None
    problems: tuple[Problem, ...]


def _str_fact(value: Any) -> Any:
    return value if n.is_text(value) else ABSENT_BAD


def _count_fact(value: Any) -> Any:
    count = n.as_count(value)
    return ABSENT_BAD if count is None else count


def _cost_fact(value: Any) -> Any:
    cost = n.as_duration(value)
    return ABSENT_BAD if cost is None else cost


def _list_count_fact(value: Any) -> Any:
    count = n.count_of(value)
    return ABSENT_BAD if count is None else count


def _bool_fact(value: Any) -> Any:
    return value if isinstance(value, bool) else ABSENT_BAD


ABSENT_BAD: Any = object()

# payload key -> (Step field, reader, what the key must hold). Content keys are counted, never kept.
FACTS: tuple[tuple[str, str, Callable[[Any], Any], str], ...] = (
    ("finishReason", "finish_reason", _str_fact, N_("a string")),
    ("promptTokens", "prompt_tokens", _count_fact, N_("an integer ≥ 0")),
    ("completionTokens", "completion_tokens", _count_fact, N_("an integer ≥ 0")),
    ("totalTokens", "total_tokens", _count_fact, N_("an integer ≥ 0")),
    ("estimatedCost", "estimated_cost", _cost_fact, N_("a finite number ≥ 0")),
    ("requestedToolCalls", "requested_tool_call_count", _list_count_fact, N_("a list")),
    ("messagesSent", "message_count", _list_count_fact, N_("a list")),
    ("toolSpecs", "tool_spec_count", _list_count_fact, N_("a list")),
    ("toolArtifacts", "artifact_count", _list_count_fact, N_("a list")),
    ("droppedSources", "dropped_source_count", _list_count_fact, N_("a list")),
    ("approved", "approved", _bool_fact, N_("a boolean")),
    ("decidedBy", "decided_by", _count_fact, N_("an integer ≥ 0")),
)


# Payload keys whose values are content (prompts, arguments, results): never quoted in a message.
CONTENT_KEYS = frozenset({"requestedToolCalls", "messagesSent", "toolSpecs", "toolArtifacts", "droppedSources"})


def _bad_type(field: str, expected: str, value: Any) -> RowRejected:
    """A wrong value, quoted only where it is a scalar of a metadata field, else named by type."""
    if field in CONTENT_KEYS or isinstance(value, (list, tuple, dict)):
        return RowRejected(
            Rule.BAD_TYPE,
            N_("%(field)s must be %(expected)s, got %(type)s"),
            field=field,
            expected=expected,
            type=_json_type_name(value),
        )
    return RowRejected(
        Rule.BAD_TYPE,
        N_("%(field)s must be %(expected)s, got %(value)s"),
        field=field,
        expected=expected,
        value=n.short_repr(value),
    )


class RowChecker:
    """Checks rows one at a time; remembers which (run, sequence) pairs it has kept."""

    def __init__(self, known_servers: Iterable[str] = (), track_duplicates: bool = True) -> None:
        self.known_servers = n.known_server_order(list(known_servers))
        self.track_duplicates = track_duplicates
        self._sequences_by_run: dict[str, set[int]] = {}

    def check(self, input_name: str, row_number: int, raw: Any) -> RowResult:
        """The row's Step (with any warnings) or the one Problem that rejects it."""
        located = _Located(input_name, row_number)
        try:
            step = self._step_of(raw, located)
        except RowRejected as rejection:
            problem = Problem(
                input_name,
                row_number,
                rejection.rule,
                rejection.message,
                rejection.params,
                located.run,
                located.sequence,
            )
            return RowResult(None, (problem,))
        if self.track_duplicates:
            self._sequences_by_run.setdefault(step.run, set()).add(step.sequence)
        return RowResult(step, step_warnings(input_name, row_number, step.run, step.sequence, step.kind,
                                             step.tool_is_error))

    def _step_of(self, raw: Any, located: "_Located") -> Step:
        if isinstance(raw, Unreadable):
            raise RowRejected(Rule.UNREADABLE_ROW, raw.message, **dict(raw.params))
        if not isinstance(raw, Mapping):
            raise RowRejected(
                Rule.UNREADABLE_ROW,
                N_("the record is not a JSON object but %(type)s"),
                type=_json_type_name(raw),
            )
        values, spelling_conflict = _columns(raw)
        for name in REQUIRED_COLUMNS:
            if values[name] is n.ABSENT:
                raise RowRejected(
                    Rule.MISSING_FIELD, N_("%(field)s is missing or null"), field=name
                )
        if spelling_conflict is not None:  # bad-type comes after missing-field in the table
            raise spelling_conflict
        basics = _basic_fields(values, located)
        payload = n.parse_payload(values["payload"])
        if payload is None:
            raise RowRejected(
                Rule.BAD_TYPE,
                N_("payload must be a JSON object or a string holding one, got %(type)s"),
                type=_json_type_name(values["payload"]),
            )
        facts = _facts(payload)
        pairs = {key: (values[key], n.payload_value(payload, key)) for key in FLATTENED_KEYS}
        for key in ("toolName", "server"):
            for value in pairs[key]:
                if value is not n.ABSENT and not n.is_text(value):
                    raise _bad_type(key, N_("a string"), value)
        _check_outcome_rules(basics["kind"], pairs["toolIsError"], pairs["toolOutcome"])
        _check_columns_agree(pairs)
        run, sequence = basics["run"], basics["sequence"]
        if self.track_duplicates and sequence in self._sequences_by_run.get(run, ()):
            raise RowRejected(Rule.DUPLICATE_STEP, DUPLICATE_MESSAGE, run=n.short_repr(run), sequence=sequence)
        return self._build_step(basics, pairs, facts)

    def _build_step(
        self, basics: dict[str, Any], pairs: dict[str, tuple[Any, Any]], facts: dict[str, Any]
    ) -> Step:
        tool_name = _first_present(pairs["toolName"])
        tool_is_error = _first_present(pairs["toolIsError"])
        is_tool = basics["kind"] == TOOL_KIND
        server = _first_present(pairs["server"]) if is_tool else n.ABSENT
        if server is n.ABSENT:
            server = n.server_of(tool_name if is_tool and tool_name is not n.ABSENT else None,
                                 self.known_servers)
        return Step(
            run=basics["run"],
            sequence=basics["sequence"],
            kind=basics["kind"],
            round=basics["round"],
            duration_ms=basics["duration_ms"],
            crdate=basics["crdate"],
            tool_name=None if tool_name is n.ABSENT else tool_name,
            server=server,
            tool_is_error=None if tool_is_error is n.ABSENT else tool_is_error,
            outcome=n.read_outcome(tool_is_error, _first_present(pairs["toolOutcome"])),
            outcome_stated=None if tool_is_error is n.ABSENT else _first_present(pairs["toolOutcome"]) is not n.ABSENT,
            **facts,
        )


@dataclass
class _Located:
    """Where a problem is, filled in as the row's run and sequence become known."""

    input: str
    row: int
    run: str | None = None
    sequence: int | None = None


def _columns(raw: Mapping[str, Any]) -> tuple[dict[str, Any], RowRejected | None]:
    """Each column's value under any spelling, and the rejection for two spellings that disagree."""
    values: dict[str, Any] = {}
    conflict: RowRejected | None = None
    for name in COLUMN_SPELLINGS:
        value, conflicting_spelling = n.column(raw, name)
        if conflicting_spelling is not None and conflict is None:
            conflict = RowRejected(
                Rule.BAD_TYPE,
                N_("%(first)s and %(second)s are both given and disagree"),
                first=COLUMN_SPELLINGS[name][0],
                second=conflicting_spelling,
            )
        values[name] = value
    return values, conflict


def _basic_fields(values: dict[str, Any], located: _Located) -> dict[str, Any]:
    run = n.as_run_id(values["run"])
    if run is None:
        raise _bad_type("run", N_("a non-empty string or an integer"), values["run"])
    located.run = run
    sequence = n.as_count(values["sequence"])
    if sequence is None:
        raise _bad_type("sequence", N_("an integer ≥ 0"), values["sequence"])
    located.sequence = sequence
    kind = values["kind"]
    if not n.is_text(kind) or kind == "":
        raise _bad_type("kind", N_("a non-empty string"), kind)
    round_number = 0 if values["round"] is n.ABSENT else n.as_count(values["round"])
    if round_number is None:
        raise _bad_type("round", N_("an integer ≥ 0"), values["round"])
    duration = 0.0 if values["durationMs"] is n.ABSENT else n.as_duration(values["durationMs"])
    if duration is None:
        raise _bad_type("durationMs", N_("a finite number ≥ 0"), values["durationMs"])
    crdate = None if values["crdate"] is n.ABSENT else n.as_count(values["crdate"])
    if values["crdate"] is not n.ABSENT and crdate is None:
        raise _bad_type("crdate", N_("an integer ≥ 0"), values["crdate"])
    return {
        "run": run,
        "sequence": sequence,
        "kind": kind,
        "round": round_number,
        "duration_ms": duration,
        "crdate": crdate,
    }


def _facts(payload: Mapping[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for key, field_name, reader, expected in FACTS:
        value = payload.get(key)
        if value is None:
            continue
        fact = reader(value)
        if fact is ABSENT_BAD:
            raise _bad_type(key, expected, value)
        facts[field_name] = fact
    return facts


def _check_outcome_rules(kind: str, flags: tuple[Any, Any], outcomes: tuple[Any, Any]) -> None:
    present_flags = [flag for flag in flags if flag is not n.ABSENT]
    present_outcomes = [outcome for outcome in outcomes if outcome is not n.ABSENT]
    for flag in present_flags:
        if not isinstance(flag, bool):
            raise RowRejected(
                Rule.FLAG_NOT_BOOLEAN,
                N_("toolIsError must be a boolean, got %(value)s"),
                value=n.short_repr(flag),
            )
    for outcome in present_outcomes:
        if not isinstance(outcome, str) or outcome not in OUTCOME_VALUES:
            raise RowRejected(
                Rule.UNKNOWN_OUTCOME,
                N_("toolOutcome must be one of ok, failed, cancelled, got %(value)s"),
                value=n.short_repr(outcome),
            )
    if present_outcomes and not present_flags:
        raise RowRejected(
            Rule.OUTCOME_WITHOUT_FLAG,
            N_("toolOutcome %(outcome)s is given without toolIsError"),
            outcome=n.short_repr(present_outcomes[0]),
        )
    for flag in present_flags:
        for outcome in present_outcomes:
            if Outcome(outcome).is_error != flag:
                raise RowRejected(
                    Rule.FLAG_CONTRADICTS_OUTCOME,
                    N_("toolIsError is %(flag)s but toolOutcome is %(outcome)s"),
                    flag=n.short_repr(flag),
                    outcome=n.short_repr(outcome),
                )
    if kind != TOOL_KIND and (present_flags or present_outcomes):
        raise RowRejected(
            Rule.OUTCOME_ON_NON_TOOL_STEP,
            N_("a %(kind)s step states a tool outcome; only tool steps may"),
            kind=n.short_repr(kind),
        )


def _check_columns_agree(pairs: dict[str, tuple[Any, Any]]) -> None:
    for key, (column_value, payload_value) in pairs.items():
        if column_value is n.ABSENT or payload_value is n.ABSENT:
            continue
        if not n.same_value(column_value, payload_value):
            raise RowRejected(
                Rule.COLUMN_CONTRADICTS_PAYLOAD,
                N_("column %(key)s is %(column)s but the payload says %(payload)s"),
                key=key,
                column=n.short_repr(column_value),
                payload=n.short_repr(payload_value),
            )


def _first_present(values: tuple[Any, Any]) -> Any:
    for value in values:
        if value is not n.ABSENT:
            return value
    return n.ABSENT


DUPLICATE_MESSAGE = N_("run %(run)s already has a step with sequence %(sequence)s; this later row is rejected")


def duplicate_problem(input_name: str, row_number: int, run: str, sequence: int) -> Problem:
    """The problem of a later row for a (run, sequence) that a kept row already has."""
    params = (("run", n.short_repr(run)), ("sequence", str(sequence)))
    return Problem(input_name, row_number, Rule.DUPLICATE_STEP, DUPLICATE_MESSAGE, params, run, sequence)


def step_warnings(
    input_name: str, row_number: int, run: str, sequence: int, kind: str, tool_is_error: bool | None
) -> tuple[Problem, ...]:
    """The warnings of a kept step: a tool step without a flag, a kind nr-llm does not write."""
    if kind == TOOL_KIND and tool_is_error is None:
        return (
            Problem(
                input_name, row_number, Rule.TOOL_STEP_WITHOUT_FLAG,
                N_("the tool step has no toolIsError, so it states no outcome; it is kept"),
                (), run, sequence,
            ),
        )
    if kind not in KNOWN_KINDS:
        return (
            Problem(
                input_name, row_number, Rule.UNKNOWN_KIND,
                N_("kind %(kind)s is not one nr-llm writes; the step is kept"),
                (("kind", n.short_repr(kind)),), run, sequence,
            ),
        )
    return ()


def _json_type_name(value: Any) -> str:
    if isinstance(value, bool):
        return N_("a boolean")
    if isinstance(value, (int, float)):
        return N_("a number")
    if isinstance(value, str):
        return N_("a string")
    if isinstance(value, (list, tuple)):
        return N_("an array")
    if isinstance(value, dict):
        return N_("an object")
    if value is None or value is n.ABSENT:
        return N_("null")
    return N_("another type")
