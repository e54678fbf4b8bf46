"""What a person sees: pages of the sample site rendered by a real headless Chromium.

Standard library only. The built site is served by ``http.server`` on 127.0.0.1
(an ephemeral port, a fresh server per browser launch) that records the Host
header, method, path and status of every request. Chromium resolves every host
name to that same server (``--host-resolver-rules``), so anything a page tried
to fetch from another host would arrive there with a foreign Host header, or as
a TLS handshake for ``https://``, and fail the test.

Where Chromium is missing the tests skip and say how to install it; in CI
(the environment variable ``CI`` set) they fail instead, because CI must run them.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import zlib
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from nrllm_report.cli import main
from nrllm_report.core.resources import sample_inputs

CHROMIUM_TIMEOUT = 60  # seconds: a hung browser fails its test instead of stalling CI
DEBIAN_CHROMIUM = "/usr/bin/chromium"
WINDOW = (1400, 1000)
DEAD_END_HOST = "127.0.0.2"  # loopback too, but not the recording server's address
LANGUAGES = ["en", "de"]

TIMELINE_HEADERS = {
    "en": ["#", "Time", "Kind", "Round", "Duration", "Tool", "Server", "Outcome", "Details"],
    "de": ["#", "Zeit", "Art", "Runde", "Dauer", "Werkzeug", "Server", "Ergebnis", "Details"],
}
SERVERS_HEADERS = {
    "en": ["Server", "Verdict", "Failure budget", "Current failure rate", "95 % interval", "Latest change",
           "Calls", "ok", "failed", "cancelled", "Cancelled share", "Last call"],
    "de": ["Server", "Urteil", "Fehlerbudget", "Aktuelle Fehlerquote", "95-%-Intervall", "Letzte Änderung",
           "Aufrufe", "ok", "fehlgeschlagen", "abgebrochen", "Anteil abgebrochen", "Letzter Aufruf"],
}
OUTCOME_COLUMN = 7
OUTCOME_LABELS = {
    "en": {"ok": "ok", "failed": "failed", "cancelled": "cancelled"},
    "de": {"ok": "ok", "failed": "fehlgeschlagen", "cancelled": "abgebrochen"},
}
# A failure rate as a person reads it: 15.4% on an English page, 15,4 % on a German one.
PERCENT = {"en": re.compile(r"(\d+(?:\.\d+)?)%"), "de": re.compile(r"(\d+(?:,\d+)?) %")}
# Stylesheet colours that only show when the stylesheet applied: the header band and the badges.
STYLE_COLOURS = ("band", "ok-bg", "failed-bg", "cancelled-bg")
# Payload keys that hold content (domain.md, Privacy): none of it may reach a page.
CONTENT_KEYS = ("messagesSent", "toolArguments", "toolResult", "content", "thinking")


# ---------------------------------------------------------------- finding and running Chromium


def find_chromium() -> str:
    """Debian's chromium; skips without it, but fails in CI, which must run these tests."""
    found = shutil.which("chromium") or (DEBIAN_CHROMIUM if os.access(DEBIAN_CHROMIUM, os.X_OK) else None)
    if found:
        return found
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail("chromium is not installed, and CI must run the browser tests: apt-get install chromium")
    pytest.skip("chromium is not installed: apt-get install chromium")


def chromium_arguments(profile: Path, resolver_port: int, dead_end_port: int) -> list[str]:
    """The flags of every launch; scripts/screenshots.py uses the same ones."""
    return [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}",
        f"--host-resolver-rules=MAP * 127.0.0.1:{resolver_port}, EXCLUDE {DEAD_END_HOST}",
        # Chromium's own services still call home despite the flags above (the network
        # time query, an on-demand component update, an account check). They are not
        # the page's requests: send them to a loopback port that refuses every
        # connection (excluded from the mapping above), so that the recording server
        # sees only what the page asked for.
        "--disable-features=NetworkTimeServiceQuerying",
        f"--component-updater=url-source=http://{DEAD_END_HOST}:{dead_end_port}/",
        f"--gaia-url=http://{DEAD_END_HOST}:{dead_end_port}/",
        "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ]


@contextlib.contextmanager
def dead_end() -> Iterator[int]:
    """A loopback port that is bound but never listens: every connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((DEAD_END_HOST, 0))
        yield sock.getsockname()[1]


def run_chromium(binary: str, arguments: list[str], workdir: Path) -> bytes:
    """Run one headless launch to its end; returns what it printed on stdout."""
    stdout_path, stderr_path = workdir / "chromium.out", workdir / "chromium.err"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        # Files, not pipes: a helper process that outlives the browser cannot block us.
        process = subprocess.Popen(
            [binary, *arguments], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
            start_new_session=True,
        )
        timed_out = False
        try:
            process.wait(timeout=CHROMIUM_TIMEOUT)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # The launch's own process group: the browser and any helper it left behind.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=CHROMIUM_TIMEOUT)
    errors = stderr_path.read_text(encoding="utf-8", errors="replace")[-3000:]
    if timed_out:
        pytest.fail(f"chromium did not finish within {CHROMIUM_TIMEOUT} s:\n{errors}")
    assert process.returncode == 0, f"chromium exited with {process.returncode}:\n{errors}"
    return stdout_path.read_bytes()


# ---------------------------------------------------------------- the recording server


@dataclass(frozen=True)
class Request:
    host: str | None
    method: str
    path: str
    status: int


class RecordingHandler(SimpleHTTPRequestHandler):
    """Serves the site and records every request, including ones it cannot parse."""

    timeout = 10  # a stuck connection ends its thread instead of the test

    def handle(self) -> None:
        try:
            head = self.connection.recv(2048, socket.MSG_PEEK)
        except OSError:
            return
        if head[:1] == b"\x16":  # a TLS handshake: an https:// URL on some host
            self.server.record(Request(f"https://{server_name(head)}", "TLS", "", 0))  # type: ignore[attr-defined]
            return
        super().handle()

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        headers = getattr(self, "headers", None)
        request = Request(
            host=headers.get("Host") if headers is not None else None,
            method=str(getattr(self, "command", None)),
            path=str(getattr(self, "path", "")),
            status=int(code),
        )
        self.server.record(request)  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the record is the log; keep pytest's output clean


def server_name(client_hello: bytes) -> str:
    """The SNI host name of a TLS ClientHello, or '?' when it has none."""
    try:
        position = 5 + 4 + 2 + 32  # record header, handshake header, version, random
        position += 1 + client_hello[position]  # session id
        position += 2 + int.from_bytes(client_hello[position : position + 2], "big")  # cipher suites
        position += 1 + client_hello[position]  # compression methods
        end = position + 2 + int.from_bytes(client_hello[position : position + 2], "big")
        position += 2
        while position < end:
            kind, length = struct.unpack(">HH", client_hello[position : position + 4])
            position += 4
            if kind == 0:  # server_name: list length, name type, name length, name
                name_length = int.from_bytes(client_hello[position + 3 : position + 5], "big")
                return client_hello[position + 5 : position + 5 + name_length].decode("ascii", "replace")
            position += length
    except (IndexError, struct.error):
        pass
    return "?"


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() then waits for every request to be recorded

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), functools.partial(RecordingHandler, directory=str(root)))
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def own_host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)


@contextlib.contextmanager
def serving(root: Path) -> Iterator[RecordingServer]:
    server = RecordingServer(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# ---------------------------------------------------------------- one visit


@dataclass
class Visit:
    """What one launch produced and what the server saw meanwhile."""

    output: bytes
    requests: list[Request]
    own_host: str

    @property
    def dom(self) -> "Dom":
        return Dom.parse(self.output.decode("utf-8"))

    def foreign_requests(self) -> list[Request]:
        return [request for request in self.requests if request.host != self.own_host]


def visit(chromium: str, site: Path, address: str, workdir: Path, screenshot: bool = False) -> Visit:
    """Open ``address`` (a path in the served site, or a file:// URL) and dump its DOM or a screenshot."""
    workdir.mkdir(parents=True, exist_ok=True)
    with serving(site) as server, dead_end() as dead_end_port:
        url = address if address.startswith("file://") else f"http://{server.own_host}/{address}"
        picture = workdir / "screenshot.png"
        action = [f"--screenshot={picture}"] if screenshot else ["--dump-dom"]
        arguments = chromium_arguments(workdir / "profile", server.port, dead_end_port) + action + [url]
        output = run_chromium(chromium, arguments, workdir)
    if screenshot:
        assert picture.is_file(), "chromium wrote no screenshot"
        output = picture.read_bytes()
    return Visit(output, list(server.requests), server.own_host)


def assert_fetched_only_from_the_site(page: Visit, path: str) -> None:
    assert page.foreign_requests() == [], "fetched from another host"
    seen = {(request.method, request.path, request.status) for request in page.requests}
    assert ("GET", f"/{path}", 200) in seen, page.requests
    assert ("GET", "/assets/style.css", 200) in seen, "the stylesheet was not loaded"


# ---------------------------------------------------------------- reading the DOM


@dataclass
class Cell:
    text: str = ""
    classes: set[str] = field(default_factory=set)  # of the elements inside the cell


@dataclass
class Row:
    classes: set[str]
    cells: list[Cell]

    def texts(self) -> list[str]:
        return [cell.text for cell in self.cells]


@dataclass
class Table:
    classes: set[str]
    headers: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def texts(self) -> list[list[str]]:
        return [row.texts() for row in self.rows]


class Dom(HTMLParser):
    """The tables of a dumped DOM, as a person reads them: cell text, and the classes that style it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lang: str | None = None
        self.tables: list[Table] = []
        self._table: Table | None = None
        self._row: Row | None = None
        self._cell: Cell | None = None
        self._in_head = False

    @classmethod
    def parse(cls, markup: str) -> "Dom":
        dom = cls()
        dom.feed(markup)
        dom.close()
        return dom

    def table(self, css_class: str) -> Table:
        found = [table for table in self.tables if css_class in table.classes]
        assert len(found) == 1, f"expected one table.{css_class}, found {len(found)}"
        return found[0]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = set((attributes.get("class") or "").split())
        if tag == "html":
            self.lang = attributes.get("lang")
        elif tag == "table":
            self._table = Table(classes)
            self.tables.append(self._table)
        elif self._table is None:
            return
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr" and not self._in_head:
            self._row = Row(classes, [])
            self._table.rows.append(self._row)
        elif tag in ("th", "td"):
            self._cell = Cell()
        elif self._cell is not None:
            self._cell.classes |= classes

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag == "thead":
            self._in_head = False
        elif tag in ("th", "td") and self._cell is not None and self._table is not None:
            self._cell.text = " ".join(self._cell.text.split())
            if self._in_head:
                self._table.headers.append(self._cell.text)
            elif self._row is not None:
                self._row.cells.append(self._cell)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.text += data


# ---------------------------------------------------------------- reading a screenshot


@dataclass
class Image:
    width: int
    height: int
    colours: set[bytes]  # every distinct RGB colour


def decode_png(data: bytes) -> Image:
    """A minimal PNG reader for Chromium's screenshots: 8-bit RGB or RGBA, not interlaced."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, compressed = 8, []
    width = height = channels = 0
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour_type in (2, 6) and interlace == 0, (depth, colour_type, interlace)
            channels = 3 if colour_type == 2 else 4
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(compressed))
    stride = width * channels
    previous = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(height):
        start = y * (stride + 1)
        line = unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, channels)
        colours.update(bytes(line[x : x + 3]) for x in range(0, stride, channels))
        previous = line
    return Image(width, height, colours)


def unfilter(kind: int, line: bytearray, previous: bytearray, channels: int) -> bytearray:
    """Undo one scanline's PNG filter (None, Sub, Up, Average, Paeth)."""
    for x in range(len(line)) if kind else ():
        left = line[x - channels] if x >= channels else 0
        up = previous[x]
        if kind == 1:
            line[x] = (line[x] + left) & 0xFF
        elif kind == 2:
            line[x] = (line[x] + up) & 0xFF
        elif kind == 3:
            line[x] = (line[x] + ((left + up) >> 1)) & 0xFF
        else:
            corner = previous[x - channels] if x >= channels else 0
            estimate = left + up - corner
            distances = (abs(estimate - left), abs(estimate - up), abs(estimate - corner))
            nearest = left if distances[0] <= distances[1] and distances[0] <= distances[2] else (
                up if distances[1] <= distances[2] else corner
            )
            line[x] = (line[x] + nearest) & 0xFF
    return line


def stylesheet_colours(site: Path) -> dict[str, bytes]:
    """The stylesheet's custom colours (``--band: #f4f6f8``) as RGB bytes, by name."""
    css = (site / "assets" / "style.css").read_text(encoding="utf-8")
    return {name: bytes.fromhex(value) for name, value in re.findall(r"--([\w-]+):\s*#([0-9a-fA-F]{6})\b", css)}


def assert_styled(picture: bytes, site: Path) -> None:
    """A real picture of a styled page: big enough, many colours, the stylesheet's colours in it."""
    assert len(picture) > 20_000, f"a {len(picture)}-byte screenshot is too small to show a page"
    image = decode_png(picture)
    assert (image.width, image.height) == WINDOW
    assert len(image.colours) > 50, f"only {len(image.colours)} colours: a blank or unstyled page"
    palette = stylesheet_colours(site)
    missing = [name for name in STYLE_COLOURS if palette[name] not in image.colours]
    assert missing == [], f"the stylesheet's {missing} colours are not on the page"


# ---------------------------------------------------------------- the sample and the site


@dataclass
class Sample:
    """What the bundled sample says, read straight from its rows, independently of the tool."""

    outcomes: dict[str, dict[int, str | None]]  # run -> sequence -> ok / failed / cancelled / None
    content: dict[str, list[str]]  # run -> content strings a page must never show

    @property
    def showcase_run(self) -> str:
        """The shortest run that has both a failed and a cancelled call."""
        candidates = [
            run for run, steps in self.outcomes.items() if {"failed", "cancelled"} <= set(steps.values())
        ]
        assert candidates, "the sample has no run with both a failed and a cancelled call"
        return min(candidates, key=lambda run: (len(self.outcomes[run]), run))


def stated_outcome(payload: dict[str, Any]) -> str | None:
    """ADR-191, decision 5: the boolean says whether, toolOutcome says which."""
    flag = payload.get("toolIsError")
    if not isinstance(flag, bool):
        return None
    return payload.get("toolOutcome") or ("failed" if flag else "ok")


def content_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) >= 12:  # long enough not to turn up on a page by chance
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from content_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from content_strings(item)


@pytest.fixture(scope="module")
def sample() -> Sample:
    outcomes: dict[str, dict[int, str | None]] = {}
    content: dict[str, list[str]] = {}
    with open(sample_inputs()[0], encoding="utf-8") as rows:
        for line in rows:
            row = json.loads(line)
            payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
            outcomes.setdefault(row["run"], {})[row["sequence"]] = stated_outcome(payload)
            for key in CONTENT_KEYS:
                content.setdefault(row["run"], []).extend(content_strings(payload.get(key)))
    return Sample(outcomes, content)


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


@pytest.fixture(scope="module")
def site(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample, built once for this module, both languages."""
    out = tmp_path_factory.mktemp("browser") / "site"
    result = CliRunner().invoke(main, ["build", "--out", str(out), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    return out


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("language", LANGUAGES)
def test_run_timeline_shows_every_step_with_its_outcome(
    chromium: str, site: Path, sample: Sample, language: str, tmp_path: Path
) -> None:
    run = sample.showcase_run
    path = f"{language}/runs/{run}.html"
    page = visit(chromium, site, path, tmp_path)
    dom = page.dom
    assert dom.lang == language
    table = dom.table("timeline")
    assert table.headers == TIMELINE_HEADERS[language]
    steps = sample.outcomes[run]
    assert [row.cells[0].text for row in table.rows] == [str(sequence) for sequence in sorted(steps)]
    for row in table.rows:
        expected = steps[int(row.cells[0].text)]
        badge = row.cells[OUTCOME_COLUMN]
        if expected is None:
            assert "outcome-none" in badge.classes, row.texts()
        else:
            assert f"outcome-{expected}" in badge.classes, row.texts()
            assert badge.text == OUTCOME_LABELS[language][expected], row.texts()
            assert f"step-{expected}" in row.classes, row.classes
    shown = {badge_class for row in table.rows for badge_class in row.cells[OUTCOME_COLUMN].classes}
    assert {"outcome-ok", "outcome-failed", "outcome-cancelled"} <= shown
    assert_fetched_only_from_the_site(page, path)


@pytest.mark.parametrize("language", LANGUAGES)
def test_servers_table_shows_every_server_with_its_figures(
    chromium: str, site: Path, language: str, tmp_path: Path
) -> None:
    summary = json.loads((site / "summary.json").read_text(encoding="utf-8"))
    path = f"{language}/servers/index.html"
    page = visit(chromium, site, path, tmp_path)
    dom = page.dom
    assert dom.lang == language
    table = dom.table("servers")
    assert table.headers == SERVERS_HEADERS[language]
    rows = {row.cells[0].text: row for row in table.rows}
    assert len(rows) == len(table.rows) == len(summary["servers"])
    assert set(rows) == set(summary["servers"])
    for server, figures in summary["servers"].items():
        cells = rows[server].texts()
        counts = [figures["ok"], figures["failed"], figures["cancelled"]]
        assert cells[7:10] == [str(count) for count in counts], (server, cells)
        assert int(cells[6]) >= sum(counts), (server, cells)
        assert f"verdict-{figures['verdict']}" in rows[server].cells[1].classes, cells
        assert rows[server].cells[1].text, cells
        current_rate = figures["current"]["failure_rate"]
        if current_rate is None:  # no ok or failed call: no rate to show
            assert cells[3] == "–", (server, cells)
            continue
        rate = PERCENT[language].fullmatch(cells[3])
        assert rate, f"{server}: failure rate {cells[3]!r} is not written for {language!r}"
        assert abs(float(rate.group(1).replace(",", ".")) - 100 * current_rate) < 0.051, cells
    assert_fetched_only_from_the_site(page, path)


def test_runs_index_marks_failed_runs_and_not_cancelled_ones(
    chromium: str, site: Path, sample: Sample, tmp_path: Path
) -> None:
    path = "en/index.html"
    page = visit(chromium, site, path, tmp_path)
    table = page.dom.table("runs")
    assert len(table.rows) == len(sample.outcomes)
    only_cancelled = 0
    for row in table.rows:
        run = row.cells[0].text.split()[0]
        outcomes = set(sample.outcomes[run].values())
        marked = "run-failed" in row.classes and "outcome-failed" in row.cells[0].classes
        assert marked == ("failed" in outcomes), (run, row.texts())
        if "cancelled" in outcomes and "failed" not in outcomes:
            only_cancelled += 1
            assert "run-failed" not in row.classes and "outcome-failed" not in row.cells[0].classes
    assert only_cancelled, "the sample has no run whose only bad calls were cancelled"
    assert_fetched_only_from_the_site(page, path)


def test_run_page_shows_no_content_from_the_export(
    chromium: str, site: Path, sample: Sample, tmp_path: Path
) -> None:
    run = sample.showcase_run
    assert sample.content[run], "the sample run carries content; the test needs some to look for"
    seen = html.unescape(visit(chromium, site, f"en/runs/{run}.html", tmp_path).output.decode("utf-8"))
    shown = [text for text in sample.content[run] if text in seen]
    assert shown == [], "content from the export reached the page"


def test_run_page_screenshot_shows_the_styled_page(
    chromium: str, site: Path, sample: Sample, tmp_path: Path
) -> None:
    path = f"en/runs/{sample.showcase_run}.html"
    page = visit(chromium, site, path, tmp_path, screenshot=True)
    assert_styled(page.output, site)
    assert_fetched_only_from_the_site(page, path)


def test_run_page_opened_from_disk_renders_the_same_table(
    chromium: str, site: Path, sample: Sample, tmp_path: Path
) -> None:
    path = f"de/runs/{sample.showcase_run}.html"
    served = visit(chromium, site, path, tmp_path / "http").dom.table("timeline")
    address = (site / path).as_uri()
    from_disk = visit(chromium, site, address, tmp_path / "file")
    assert from_disk.dom.table("timeline") == served
    assert from_disk.requests == [], "a page opened from disk reached the network"
    picture = visit(chromium, site, address, tmp_path / "picture", screenshot=True)
    assert_styled(picture.output, site)
    assert picture.requests == []


def test_single_file_timeline_renders_on_its_own(
    chromium: str, site: Path, sample: Sample, tmp_path: Path
) -> None:
    run = sample.showcase_run
    attachment = tmp_path / "ticket" / "timeline.html"
    attachment.parent.mkdir()
    result = CliRunner().invoke(main, ["timeline", run, "--out", str(attachment), "--lang", "de"])
    assert result.exit_code == 0, result.output
    alone = visit(chromium, site, attachment.as_uri(), tmp_path / "dom")
    in_site = visit(chromium, site, f"de/runs/{run}.html", tmp_path / "site").dom.table("timeline")
    assert alone.dom.table("timeline").texts() == in_site.texts()
    assert alone.requests == []
    picture = visit(chromium, site, attachment.as_uri(), tmp_path / "picture", screenshot=True)
    assert_styled(picture.output, site)  # the inlined CSS passed the page's own policy
    assert picture.requests == []
