"""Languages: the catalogs are complete and current, every outcome has a label and a
CSS class in every language (one string end to end), and German pages show no English UI text."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from datetime import time, timezone
from pathlib import Path
from typing import Any

import pytest
from babel import Locale, dates
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po
from command_line import invoke
from site_helpers import (
    REPO,
    build_ok,
    crafted_rows,
    html_pages,
    page,
    read_jsonl,
    table_rows,
    tool,
    visible_text,
    write_jsonl,
)

from nrllm_report.core.model import KNOWN_KINDS, LatencyVerdict, Outcome, Verdict
from nrllm_report.core.options import LANGUAGES
from nrllm_report.site.i18n import SECONDS_PER_DAY, Formatter, compile_time_pattern, translations

TRANSLATIONS = REPO / "translations"
POT = TRANSLATIONS / "messages.pot"
STYLESHEET = REPO / "templates" / "assets" / "style.css"
PLACEHOLDER = re.compile(r"%\(\w+\)s|%%")


def catalog_file(language: str) -> Path:
    return TRANSLATIONS / language / "LC_MESSAGES" / "messages.po"


def load(path: Path, language: str | None = None) -> Catalog:
    with path.open("rb") as stream:
        return read_po(stream, locale=language, abort_invalid=True)


def ids(catalog: Catalog) -> set[str]:
    return {message.id if isinstance(message.id, str) else message.id[0] for message in catalog if message.id}


# ---------------------------------------------------------------- the German catalog


@pytest.fixture(scope="module")
def german() -> Catalog:
    return load(catalog_file("de"), "de")


@pytest.mark.parametrize("path", [catalog_file("de"), catalog_file("en"), POT], ids=["de", "en", "pot"])
def test_catalog_is_well_formed(path: Path) -> None:
    catalog = load(path)  # abort_invalid: a malformed entry raises PoFileError
    assert len(catalog) > 50


def is_translated(message: Any) -> bool:
    """Every form of the message (one, or each plural form) has a non-empty text."""
    strings = message.string if isinstance(message.string, tuple) else (message.string,)
    return bool(strings) and all(strings)


def test_german_catalog_has_a_translation_for_every_message(german: Catalog) -> None:
    assert [message.id for message in german if message.id and not is_translated(message)] == []


def test_german_catalog_has_no_fuzzy_message(german: Catalog) -> None:
    assert [message.id for message in german if message.id and message.fuzzy] == []


@pytest.mark.parametrize("language", LANGUAGES)
def test_catalog_header_is_not_fuzzy(language: str) -> None:
    catalog = load(catalog_file(language), language)
    assert not catalog.fuzzy, f"{catalog_file(language)}: the header carries '#, fuzzy'"
    assert catalog.locale is not None and str(catalog.locale) == language


def test_german_placeholders_match_their_messages(german: Catalog) -> None:
    """Babel's check: python-format placeholders of msgid and msgstr agree."""
    errors = [(message.id, [str(error) for error in found]) for message, found in german.check()]
    assert errors == []
    for message in german:
        if message.id and isinstance(message.id, str):
            assert sorted(PLACEHOLDER.findall(message.id)) == sorted(PLACEHOLDER.findall(message.string)), message.id


@pytest.mark.parametrize("language", LANGUAGES)
def test_catalog_holds_exactly_the_template_messages(language: str) -> None:
    assert ids(load(catalog_file(language), language)) == ids(load(POT))


def gettext_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """The literal messages a module passes to ``…gettext(…)`` or ``…ngettext(…)`` (a call on any
    object, as ``kit.gettext``), which extraction does not see: its keywords are ``_``, ``N_``, ``ngettext``."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"gettext", "ngettext"} and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, node.args[0].value))
    return found


def test_every_literal_the_code_translates_is_in_the_catalog() -> None:
    """A message passed as a literal to ``kit.gettext`` is translated only if it is also marked
    (``N_``) or used in a template; otherwise a German page shows it in English."""
    known = ids(load(POT))
    missing = [f"{path.relative_to(REPO)}:{line} {message!r}" for path in sorted((REPO / "nrllm_report").rglob("*.py"))
               for line, message in gettext_literals(ast.parse(path.read_text(encoding="utf-8")))
               if message not in known]
    assert missing == []


def test_a_literal_passed_to_gettext_is_found() -> None:
    tree = ast.parse("kit.gettext('truncated')\nself.kit.ngettext('a', 'b', 2)\nkit.gettext(name)\n")
    assert gettext_literals(tree) == [(1, "truncated"), (2, "a")]


def messages_of(catalog: Catalog) -> dict[Any, Any]:
    return {message.id: message.string for message in catalog if message.id}


def test_catalogs_are_up_to_date_with_the_code_and_templates(tmp_path: Path) -> None:
    """Running scripts/update_catalogs.py on a copy of the repository changes no message."""
    copy = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("nrllm_report", "templates", "translations", "scripts"):
        shutil.copytree(REPO / name, copy / name, ignore=ignore)
    shutil.copy2(REPO / "pyproject.toml", copy / "pyproject.toml")
    completed = subprocess.run(
        [sys.executable, str(copy / "scripts" / "update_catalogs.py")],
        cwd=copy, capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    fresh_template = load(copy / "translations" / "messages.pot")
    assert ids(fresh_template) - ids(load(POT)) == set(), "messages in the code missing from messages.pot"
    assert ids(load(POT)) - ids(fresh_template) == set(), "messages.pot holds messages no longer used"
    for language in LANGUAGES:
        updated = load(copy / "translations" / language / "LC_MESSAGES" / "messages.po", language)
        assert messages_of(updated) == messages_of(load(catalog_file(language), language)), language
        assert not updated.fuzzy, f"update_catalogs.py leaves the {language} header fuzzy (or drops it)"


# ---------------------------------------------------------------- labels selected by value


LABEL_KEYS = (
    [f"outcome.{outcome.value}" for outcome in Outcome]
    + [f"kind.{kind}" for kind in sorted(KNOWN_KINDS)]
    + [f"verdict.{verdict.value}" for verdict in Verdict]
    # the latency verdicts (core.model.LatencyVerdict) share uncertain and too-few-calls with Verdict
    + sorted(
        {f"verdict.{verdict.value}" for verdict in LatencyVerdict} - {f"verdict.{verdict.value}" for verdict in Verdict}
    )
)


@pytest.mark.parametrize("key", LABEL_KEYS)
@pytest.mark.parametrize("language", LANGUAGES)
def test_every_label_key_has_a_label_in_every_language(language: str, key: str) -> None:
    label = translations(language).gettext(key)
    assert label and label != key


def test_english_catalog_spells_out_every_label_key() -> None:
    english = load(catalog_file("en"), "en")
    keys = {
        message.id
        for message in english
        if isinstance(message.id, str) and message.id.startswith(("outcome.", "kind.", "verdict."))
    }
    assert keys == set(LABEL_KEYS)
    assert [message.id for message in english if message.id in keys and not message.string] == []


@pytest.mark.parametrize("outcome", [outcome.value for outcome in Outcome])
def test_every_outcome_has_a_css_class(outcome: str) -> None:
    css = STYLESHEET.read_text(encoding="utf-8")
    # The class itself as a selector (not only inside ".outcome-x .outcome-mark" or "rect.outcome-x").
    assert re.search(rf"(?:^|[\s,}}])\.outcome-{re.escape(outcome)}\s*[{{,]", css, re.MULTILINE), (
        f".outcome-{outcome} is not styled"
    )


@pytest.fixture(scope="module")
def one_of_each(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run with one call of each outcome: its normalized records and its built site."""
    folder = tmp_path_factory.mktemp("outcomes")
    rows = [
        tool("each", index, "mcp_github_list_issues", outcome != "ok", outcome, crdate=1_788_000_000 + index)
        for index, outcome in enumerate(outcome.value for outcome in Outcome)
    ]
    source = write_jsonl(folder / "rows.jsonl", rows)
    normalized = invoke("normalize", str(source), "--out", str(folder / "canonical.jsonl"))
    assert normalized.exit_code == 0, normalized.output
    build_ok(source, "--out", folder / "site")
    return {
        "rows": rows,
        "records": read_jsonl(folder / "canonical.jsonl"),
        "site": folder / "site",
        "summary": json.loads((folder / "site" / "summary.json").read_text(encoding="utf-8")),
    }


@pytest.mark.parametrize("outcome", [outcome.value for outcome in Outcome])
def test_one_string_travels_end_to_end(one_of_each: dict[str, Any], outcome: str) -> None:
    """ADR-191 decision 3: data value, normalized outcome, CSS class, summary key and label key."""
    position = [row["payload"]["toolOutcome"] for row in one_of_each["rows"]].index(outcome)
    assert one_of_each["records"][position]["outcome"] == outcome
    assert one_of_each["summary"]["outcomes"][outcome] == 1
    assert one_of_each["summary"]["servers"]["github"][outcome] == 1
    for language in LANGUAGES:
        row = table_rows(page(one_of_each["site"] / language / "runs" / "each.html"), "timeline")[position]
        badge = row.find("span", f"outcome-{outcome}")
        assert badge.text() == translations(language).gettext(f"outcome.{outcome}")
    test_every_outcome_has_a_css_class(outcome)


# ---------------------------------------------------------------- German pages


def english_ui_phrases() -> list[str]:
    """The English text of every message whose German text differs, cut at placeholders."""
    english = load(catalog_file("en"), "en")
    german = load(catalog_file("de"), "de")
    phrases: set[str] = set()
    for message in english:
        if not message.id or not isinstance(message.id, str):
            continue
        text = message.string or message.id
        if german[message.id].string == text:  # "Server", "Details", "ok": the same in both
            continue
        for fragment in PLACEHOLDER.split(text):
            fragment = fragment.strip(" .,;:()=/–-")
            if re.search(r"[A-Za-z]{3}", fragment) and fragment not in IDENTIFIERS:
                phrases.add(fragment)
    return sorted(phrases)


# Column and payload key names (domain.md): identifiers a message names as data in either language.
IDENTIFIERS = frozenset({
    "uid", "run", "sequence", "kind", "round", "duration_ms", "durationMs", "payload", "crdate", "server",
    "toolName", "toolIsError", "toolOutcome", "finishReason", "promptTokens", "completionTokens", "totalTokens",
    "estimatedCost", "requestedToolCalls", "messagesSent", "toolSpecs", "toolArtifacts", "droppedSources",
    "approved", "decidedBy",
})
ENGLISH_DATES = re.compile(r"\b(AM|PM|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b")
QUOTED_DATA = re.compile(r"'[^']*'")  # values quoted in messages are data, not UI


@pytest.fixture(scope="module")
def german_pages(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("german")
    build_ok("--out", folder / "sample", "--lang", "de")
    build_ok(write_jsonl(folder / "crafted.jsonl", crafted_rows()), "--out", folder / "crafted", "--lang", "de")
    return html_pages(folder / "sample") + html_pages(folder / "crafted")


@pytest.mark.slow
def test_german_pages_show_no_english_ui_text(german_pages: list[Path]) -> None:
    phrases = english_ui_phrases()
    assert {"Runs", "Servers", "Duration", "failed", "cancelled", "Tool calls"} <= set(phrases)
    patterns = [(phrase, re.compile(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])")) for phrase in phrases]
    offenders = []
    for path in german_pages:
        text = QUOTED_DATA.sub("", visible_text(page(path), "de"))
        offenders += [(path.name, phrase) for phrase, pattern in patterns if pattern.search(text)]
        offenders += [(path.name, found) for found in ENGLISH_DATES.findall(text)]
    assert offenders == []


@pytest.mark.parametrize("language", ["en", "de", "en_AU", "fr", "ja", "ar"])
def test_a_time_of_day_is_what_babel_writes_for_every_second_of_the_day(language: str) -> None:
    """The fast path makes the day's texts at once from the locale's pattern; each is Babel's (every
    seventh second: every hour, minute and second of a minute, and each half of the day, is among them)."""
    fast = compile_time_pattern(Locale.parse(language))
    assert fast is not None, f"{language}'s medium time pattern took Babel's path"
    fmt = Formatter(language, timezone.utc)
    assert fmt.time_of_day(13 * 3_600 + 5 * 60 + 9) == fast(13 * 3_600 + 5 * 60 + 9)
    seconds = range(0, SECONDS_PER_DAY, 7)
    assert [fast(second) for second in seconds] == [
        dates.format_time(time(second // 3_600, second // 60 % 60, second % 60), "medium", locale=language)
        for second in seconds
    ]
