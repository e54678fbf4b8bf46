"""The rule codes: every raw row becomes a canonical Step or a Problem, never both, never neither.

Rules are checked in the order of ``Rule``; a rejected row gets the first that
applies. Warnings are added only to rows that are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core import jsontext
from ..core.model import KNOWN_KINDS, N_, TOOL_KIND, Outcome, Problem, Rule, Unreadable
from ..core.schema import (
    CANONICAL_FACTS,
    CANONICAL_NAMES,
    COLUMN_SPELLINGS,
    DECIMAL_COLUMNS,
    FACT_FIELD_NAMES,
    FLATTENED_KEYS,
    OUTCOME_STATED,
    Step,
)
from . import normalize

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


def _is_count(value: Any) -> bool:
    return normalize.as_count(value) is not None


def _is_cost(value: Any) -> bool:
    return normalize.as_duration(value) is not None


def _is_boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _is_texts(value: Any) -> bool:
    return normalize.as_texts(value) is not None


def _is_spec_list(value: Any) -> bool:
    """``toolSpecs``: names, or spec objects that carry one (their descriptions are content)."""
    return isinstance(value, list) and all(
        normalize.is_text(item) or (isinstance(item, dict) and normalize.is_text(item.get("name"))) for item in value
    )


def _any(value: Any) -> bool:
    return True


A_STRING, A_COUNT, A_LIST, NAMES = N_("a string"), N_("an integer ≥ 0"), N_("a list"), N_("a list of strings")

# What each payload key the checker reads must hold; a key of another type is bad-type.
# The content keys are read only to count, measure and name them; a content string of
# another type is not measured (as nr-llm's privacy filter does), never quoted.
PAYLOAD_KEY_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "finishReason": (normalize.is_text, A_STRING),
    "promptTokens": (_is_count, A_COUNT),
    "completionTokens": (_is_count, A_COUNT),
    "totalTokens": (_is_count, A_COUNT),
    "estimatedCost": (_is_cost, N_("a finite number ≥ 0")),
    "messagesSentCount": (_is_count, A_COUNT),
    "messagesSent": (lambda value: normalize.count_of(value) is not None, A_LIST),
    "requestedToolNames": (_is_texts, NAMES),
    "requestedToolCalls": (_is_list, A_LIST),
    "toolSpecs": (_is_spec_list, N_("a list of names")),
    "toolArtifactsCount": (_is_count, A_COUNT),
    "toolArtifactTypes": (_is_texts, NAMES),
    "toolArtifacts": (_is_list, A_LIST),
    "contentLength": (_is_count, A_COUNT),
    "thinkingLength": (_is_count, A_COUNT),
    "toolResultLength": (_is_count, A_COUNT),
    "content": (_any, A_STRING),
    "thinking": (_any, A_STRING),
    "toolResult": (_any, A_STRING),
    "contentRedacted": (_is_boolean, N_("a boolean")),
    "droppedSources": (_is_texts, NAMES),
    "approved": (_is_boolean, N_("a boolean")),
    "decidedBy": (_is_count, A_COUNT),
}


def _same(value: Any) -> Any:
    return value


def _spec_names(specs: list[Any]) -> tuple[str, ...]:
    return tuple(spec if isinstance(spec, str) else spec["name"] for spec in specs)


# Each fact of a Step and where a payload holds it: the first source present gives it. The
# metadata key nr-llm's privacy filter writes comes first, then the content it is made from,
# derived the same way: a list's length, a string's length in characters, the names of the
# requested calls, the types of the artifacts. The content itself is never kept.
PAYLOAD_FACTS: dict[str, tuple[tuple[str, Callable[[Any], Any]], ...]] = {
    "finish_reason": (("finishReason", _same),),
    "prompt_tokens": (("promptTokens", _same),),
    "completion_tokens": (("completionTokens", _same),),
    "total_tokens": (("totalTokens", _same),),
    "estimated_cost": (("estimatedCost", normalize.as_duration),),
    "requested_tool_call_count": (("requestedToolNames", len), ("requestedToolCalls", len)),
    "message_count": (("messagesSentCount", _same), ("messagesSent", len)),
    "tool_spec_count": (("toolSpecs", len),),
    "artifact_count": (("toolArtifactsCount", _same), ("toolArtifacts", len)),
    "dropped_source_count": (("droppedSources", len),),
    "approved": (("approved", _same),),
    "decided_by": (("decidedBy", _same),),
    "requested_tool_names": (("requestedToolNames", tuple),
                             ("requestedToolCalls", lambda calls: normalize.named_items(calls, "name"))),
    "tool_specs": (("toolSpecs", _spec_names),),
    "tool_artifact_types": (("toolArtifactTypes", tuple),
                            ("toolArtifacts", lambda artifacts: normalize.named_items(artifacts, "type"))),
    "content_length": (("contentLength", _same), ("content", normalize.text_length)),
    "thinking_length": (("thinkingLength", _same), ("thinking", normalize.text_length)),
    "tool_result_length": (("toolResultLength", _same), ("toolResult", normalize.text_length)),
    "content_redacted": (("contentRedacted", _same),),
    "dropped_sources": (("droppedSources", tuple),),
}
assert set(PAYLOAD_FACTS) == set(FACT_FIELD_NAMES)
assert {key for sources in PAYLOAD_FACTS.values() for key, _how in sources} == set(PAYLOAD_KEY_TYPES)

# How a canonical record's fact is read back, by its Arrow type: (check, value, expected).
_CANONICAL_READERS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], Any], str]] = {
    "int64": (_is_count, _same, A_COUNT),
    "double": (_is_cost, normalize.as_duration, N_("a finite number ≥ 0")),
    "string": (normalize.is_text, _same, A_STRING),
    "bool": (_is_boolean, _same, N_("a boolean")),
    "list<item: string>": (_is_texts, tuple, NAMES),
}
CANONICAL_FACT_READERS = {
    CANONICAL_NAMES[field]: (field, *_CANONICAL_READERS[str(CANONICAL_FACTS[CANONICAL_NAMES[field]])])
    for field in FACT_FIELD_NAMES
}


# Keys whose values are content (prompts, answers, arguments, results) or lists: never quoted in a message.
CONTENT_KEYS = frozenset({
    "requestedToolCalls", "messagesSent", "toolSpecs", "toolArtifacts", "droppedSources", "content", "thinking",
    "toolResult", "toolArguments", "raw", "requestedToolNames", "toolArtifactTypes",
})


def _bad_type(field: str, expected: str, *, value: Any) -> RowRejected:
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
        value=normalize.short_repr(value),
    )


class RowChecker:
    """Checks rows one at a time; remembers which (run, sequence) pairs it has kept."""

    def __init__(self, known_servers: Iterable[str] = (), track_duplicates: bool = True) -> None:
        self.known_servers = normalize.known_server_order(list(known_servers))
        self.track_duplicates = track_duplicates
        self._sequences_by_run: dict[str, set[int]] = {}

    def check(self, input_name: str, row_number: int, *, raw: Any) -> RowResult:
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
        return RowResult(step, step_warnings(input_name, row_number, run=step.run, sequence=step.sequence,
                                             kind=step.kind,
                                             tool_is_error=step.tool_is_error))

    def _step_of(self, raw: Any, located: _Located) -> Step:
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
            if values[name] is normalize.ABSENT:
                raise RowRejected(
                    Rule.MISSING_FIELD, N_("%(field)s is missing or null"), field=name
                )
        if spelling_conflict is not None:  # bad-type comes after missing-field in the table
            raise spelling_conflict
        basics = _basic_fields(values, located)
        payload = normalize.parse_payload(values["payload"])
        if payload is None:
            raise _payload_rejected(values["payload"])
        if values["payload"] is normalize.ABSENT:
            facts, stated_given = _canonical_facts(raw), _outcome_stated_given(raw)
        else:
            facts, stated_given = _payload_facts(payload), normalize.ABSENT
        pairs = {key: (values[key], normalize.payload_value(payload, key)) for key in FLATTENED_KEYS}
        _check_names(pairs)
        _check_outcome_rules(basics["kind"], pairs["toolIsError"], outcomes=pairs["toolOutcome"])
        _check_columns_agree(pairs)
        run, sequence = basics["run"], basics["sequence"]
        if self.track_duplicates and sequence in self._sequences_by_run.get(run, ()):
            raise RowRejected(Rule.DUPLICATE_STEP, DUPLICATE_MESSAGE, run=normalize.short_repr(run), sequence=sequence)
        return self._build_step(basics, pairs, facts=facts, stated_given=stated_given)

    def _build_step(
        self, basics: dict[str, Any], pairs: dict[str, tuple[Any, Any]], *, facts: dict[str, Any], stated_given: Any
    ) -> Step:
        tool_name = _first_present(pairs["toolName"])
        tool_is_error = _first_present(pairs["toolIsError"])
        stated = (_first_present(pairs["toolOutcome"]) is not normalize.ABSENT if stated_given is normalize.ABSENT
                  else stated_given)
        is_tool = basics["kind"] == TOOL_KIND
        server = _first_present(pairs["server"]) if is_tool else normalize.ABSENT
        if server is normalize.ABSENT:
            server = normalize.server_of(tool_name if is_tool and tool_name is not normalize.ABSENT else None,
                                 self.known_servers)
        return Step(
            run=basics["run"],
            sequence=basics["sequence"],
            kind=basics["kind"],
            round=basics["round"],
            duration_ms=basics["duration_ms"],
            crdate=basics["crdate"],
            tool_name=None if tool_name is normalize.ABSENT else tool_name,
            server=server,
            tool_is_error=None if tool_is_error is normalize.ABSENT else tool_is_error,
            outcome=normalize.read_outcome(tool_is_error, _first_present(pairs["toolOutcome"])),
            outcome_stated=None if tool_is_error is normalize.ABSENT else stated,
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
        value, conflicting_spelling = normalize.column(raw, name)
        if conflicting_spelling is not None and conflict is None:
            conflict = RowRejected(
                Rule.BAD_TYPE,
                N_("%(first)s and %(second)s are both given and disagree"),
                first=COLUMN_SPELLINGS[name][0],
                second=conflicting_spelling,
            )
        values[name] = value
    return values, conflict


def _column_number(values: dict[str, Any], name: str, *, default: Any) -> Any:
    """A table column's number (JSON number or plain-number text), ``default`` when absent."""
    value = values[name]
    if value is normalize.ABSENT:
        return default
    if name in DECIMAL_COLUMNS:
        number = normalize.as_column_decimal(value)
        if number is None:
            raise _bad_type(name, N_("a finite number ≥ 0"), value=value)
        return number
    number = normalize.as_column_integer(value)
    if number is None:
        raise _bad_type(name, N_("an integer ≥ 0"), value=value)
    return number


def _basic_fields(values: dict[str, Any], located: _Located) -> dict[str, Any]:
    run = normalize.as_run_id(values["run"])
    if run is None:
        raise _bad_type("run", N_("a non-empty string or an integer"), value=values["run"])
    located.run = run
    located.sequence = sequence = _column_number(values, "sequence", default=None)
    kind = values["kind"]
    if not normalize.is_text(kind) or kind == "":
        raise _bad_type("kind", N_("a non-empty string"), value=kind)
    round_number = _column_number(values, "round", default=0)
    duration = _column_number(values, "durationMs", default=0.0)
    crdate = _column_number(values, "crdate", default=None)
    _column_number(values, "uid", default=None)  # checked, not kept: the row's own id says nothing of the run
    return {
        "run": run,
        "sequence": sequence,
        "kind": kind,
        "round": round_number,
        "duration_ms": duration,
        "crdate": crdate,
    }


def _payload_facts(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The facts of an export row's payload; a key of the wrong type rejects the row."""
    for key, (holds, expected) in PAYLOAD_KEY_TYPES.items():
        value = payload.get(key)
        if value is not None and not holds(value):
            raise _bad_type(key, expected, value=value)
    facts: dict[str, Any] = {}
    for field_name, sources in PAYLOAD_FACTS.items():
        for key, derive in sources:
            value = payload.get(key)
            fact = None if value is None else derive(value)
            if fact is not None:
                facts[field_name] = fact
                break
    return facts


def _canonical_facts(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The facts of a row without a payload, such as a canonical record: at its top level."""
    facts: dict[str, Any] = {}
    for name, (field_name, holds, read, expected) in CANONICAL_FACT_READERS.items():
        value = raw.get(name)
        if value is None:
            continue
        if not holds(value):
            raise _bad_type(name, expected, value=value)
        facts[field_name] = read(value)
    return facts


def _outcome_stated_given(raw: Mapping[str, Any]) -> Any:
    """A canonical record's ``outcomeStated`` (its ``outcome`` is always there), or ABSENT."""
    value = raw.get(OUTCOME_STATED)
    if value is None:
        return normalize.ABSENT
    if not isinstance(value, bool):
        raise _bad_type(OUTCOME_STATED, N_("a boolean"), value=value)
    return value


def _check_names(pairs: dict[str, tuple[Any, Any]]) -> None:
    """``toolName`` is a string; ``server`` a non-empty one, like ``run`` and ``kind``: an
    empty server would name an MCP server ``""`` in every figure."""
    for value in pairs["toolName"]:
        if value is not normalize.ABSENT and not normalize.is_text(value):
            raise _bad_type("toolName", N_("a string"), value=value)
    for value in pairs["server"]:
        if value is not normalize.ABSENT and (not normalize.is_text(value) or value == ""):
            raise _bad_type("server", N_("a non-empty string"), value=value)


def _check_outcome_rules(kind: str, flags: tuple[Any, Any], *, outcomes: tuple[Any, Any]) -> None:
    present_flags = [flag for flag in flags if flag is not normalize.ABSENT]
    present_outcomes = [outcome for outcome in outcomes if outcome is not normalize.ABSENT]
    for flag in present_flags:
        if not isinstance(flag, bool):
            raise RowRejected(
                Rule.FLAG_NOT_BOOLEAN,
                N_("toolIsError must be a boolean, got %(value)s"),
                value=normalize.short_repr(flag),
            )
    for outcome in present_outcomes:
        if not isinstance(outcome, str) or outcome not in OUTCOME_VALUES:
            raise RowRejected(
                Rule.UNKNOWN_OUTCOME,
                N_("toolOutcome must be one of ok, failed, cancelled, got %(value)s"),
                value=normalize.short_repr(outcome),
            )
    if present_outcomes and not present_flags:
        raise RowRejected(
            Rule.OUTCOME_WITHOUT_FLAG,
            N_("toolOutcome %(outcome)s is given without toolIsError"),
            outcome=normalize.short_repr(present_outcomes[0]),
        )
    for flag in present_flags:
        for outcome in present_outcomes:
            if Outcome(outcome).is_error != flag:
                raise RowRejected(
                    Rule.FLAG_CONTRADICTS_OUTCOME,
                    N_("toolIsError is %(flag)s but toolOutcome is %(outcome)s"),
                    flag=normalize.short_repr(flag),
                    outcome=normalize.short_repr(outcome),
                )
    if kind != TOOL_KIND and (present_flags or present_outcomes):
        raise RowRejected(
            Rule.OUTCOME_ON_NON_TOOL_STEP,
            N_("a %(kind)s step states a tool outcome; only tool steps may"),
            kind=normalize.short_repr(kind),
        )


def _check_columns_agree(pairs: dict[str, tuple[Any, Any]]) -> None:
    for key, (column_value, payload_value) in pairs.items():
        if column_value is normalize.ABSENT or payload_value is normalize.ABSENT:
            continue
        if not normalize.same_value(column_value, payload_value):
            raise RowRejected(
                Rule.COLUMN_CONTRADICTS_PAYLOAD,
                N_("column %(key)s is %(column)s but the payload says %(payload)s"),
                key=key,
                column=normalize.short_repr(column_value),
                payload=normalize.short_repr(payload_value),
            )


def _first_present(values: tuple[Any, Any]) -> Any:
    for value in values:
        if value is not normalize.ABSENT:
            return value
    return normalize.ABSENT


DUPLICATE_MESSAGE = N_("run %(run)s already has a step with sequence %(sequence)s; this later row is rejected")


def duplicate_problem(input_name: str, row_number: int, *, run: str, sequence: int) -> Problem:
    """The problem of a later row for a (run, sequence) that a kept row already has."""
    params = (("run", normalize.short_repr(run)), ("sequence", str(sequence)))
    return Problem(input_name, row_number, Rule.DUPLICATE_STEP, DUPLICATE_MESSAGE, params, run, sequence)


def step_warnings(
    input_name: str, row_number: int, *, run: str, sequence: int, kind: str, tool_is_error: bool | None
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
                (("kind", normalize.short_repr(kind)),), run, sequence,
            ),
        )
    return ()


def _payload_rejected(value: Any) -> RowRejected:
    """Why a payload is not an object: text that is not JSON (and where it breaks), JSON text of
    another type, or a value of another type."""
    if not isinstance(value, (str, bytes)):
        return RowRejected(Rule.BAD_TYPE, N_("payload must be a JSON object or a string holding one, got %(type)s"),
                           type=_json_type_name(value))
    try:
        parsed = jsontext.loads(value)
    except jsontext.JsonTextError as error:
        return _payload_not_json(value, error)
    return RowRejected(Rule.BAD_TYPE, N_("payload must be a JSON object, got JSON text holding %(type)s"),
                       type=_json_type_name(parsed))


def _payload_not_json(text: str | bytes, error: jsontext.JsonTextError) -> RowRejected:
    reason = error.reason
    if reason is jsontext.Reason.NOT_UTF8:
        return RowRejected(Rule.BAD_TYPE, N_("payload is text that is not JSON: byte %(position)s is not UTF-8"),
                           position=error.offset)
    if reason is jsontext.Reason.TOO_DEEP:
        return RowRejected(Rule.BAD_TYPE, N_("payload is text that is not JSON as this tool reads it: its arrays "
                                             "and objects nest more than %(limit)s deep"), limit=jsontext.MAX_NESTING)
    if reason is jsontext.Reason.NUMBER_TOO_LONG:
        return RowRejected(Rule.BAD_TYPE, N_("payload is text that is not JSON as this tool reads it: an integer "
                                             "has more than %(limit)s digits"), limit=jsontext.MAX_INTEGER_DIGITS)
    # Where, never what: the text may be content a page must not show (a payload at "full").
    length = len(text) if isinstance(text, str) else len(bytes(text).decode("utf-8", "replace"))
    if error.offset > length:
        return RowRejected(Rule.BAD_TYPE, N_("payload is text that is not JSON: it ends at character %(position)s "
                                             "before the JSON does"), position=error.offset)
    return RowRejected(Rule.BAD_TYPE, N_("payload is text that is not JSON: it cannot be read from character "
                                         "%(position)s on, of %(length)s"), position=error.offset, length=length)


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
    if value is None or value is normalize.ABSENT:
        return N_("null")
    return N_("another type")
