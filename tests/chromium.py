"""Debian's Chromium under Playwright, one way for the browser tests and for scripts/screenshots.py.

Nothing is downloaded: Playwright drives ``/usr/bin/chromium``. Two fences keep
every page on the machine and prove it:

- every host name but 127.0.0.1 resolves to nothing (``--host-resolver-rules``),
  so no request, the page's or one of Chromium's own background services', can
  leave the machine;
- each context routes every request (``guarded_context``): one for a file on this
  machine or for the site's own server goes through; any other (another host, a
  ``file://host/`` share) is recorded as foreign and aborted, and the test that
  opened the page fails on it (the ``visit`` fixture in conftest.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from markup import norm
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, Route

DEBIAN_CHROMIUM = "/usr/bin/chromium"
LOCAL_HOST = "127.0.0.1"
WINDOW = {"width": 1400, "height": 1000}
TIMEOUT_MS = 30_000  # a hung browser fails its test instead of stalling CI


def chromium_path() -> str | None:
    """Debian's chromium (or another one on PATH), or None when none is installed."""
    if os.access(DEBIAN_CHROMIUM, os.X_OK):
        return DEBIAN_CHROMIUM
    return shutil.which("chromium")


def launch_arguments() -> list[str]:
    """Chromium's flags for every launch: headless as root, quiet, and no host but ours."""
    return [
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--hide-scrollbars",
        f"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE {LOCAL_HOST}",
    ]


def launch(playwright: Playwright, executable: str) -> Browser:
    """One headless Chromium with ``launch_arguments()``."""
    return playwright.chromium.launch(
        executable_path=executable, headless=True, args=launch_arguments(), timeout=TIMEOUT_MS
    )


# ---------------------------------------------------------------- what a context fetched


@dataclass
class Traffic:
    """Every request the pages of one context made, and what went wrong on them."""

    own_origin: str | None  # ``http://127.0.0.1:port``, or None for pages opened from disk
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, url), file:// ones too
    responses: list[tuple[str, str, int]] = field(default_factory=list)  # (method, path, status)
    foreign: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # console errors (a blocked style says so there)

    def is_own(self, url: str) -> bool:
        """A file on this machine, or a URL of the site's own server."""
        parts = urlsplit(url)
        if parts.scheme == "file":  # file://host/share is another machine (a UNC path on Windows)
            return parts.netloc in ("", "localhost")
        if parts.scheme == "data":
            return True
        return self.own_origin is not None and url.startswith(f"{self.own_origin}/")

    def route(self, route: Route) -> None:
        request = route.request
        if self.is_own(request.url):
            route.continue_()
        else:
            self.foreign.append(f"{request.method} {request.url}")
            route.abort("blockedbyclient")

    def problems(self) -> list[str]:
        """What must not happen on any page: a fetch from another host, an error in the console."""
        return [f"fetched from another host: {url}" for url in self.foreign] + [
            f"console error: {text}" for text in self.errors
        ]


def origin_of(url: str) -> str | None:
    """The origin a page at ``url`` may fetch from; None for a page opened from disk."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else None


def guarded_context(browser: Browser, own_origin: str | None, **options: Any) -> tuple[BrowserContext, Traffic]:
    """A fresh context whose every request is recorded, and aborted unless it is to ``own_origin``."""
    context = browser.new_context(**{"viewport": WINDOW, **options})
    context.set_default_timeout(TIMEOUT_MS)
    traffic = Traffic(own_origin)
    context.route("**/*", traffic.route)
    context.on("request", lambda request: traffic.requests.append((request.method, request.url)))
    context.on("response", lambda response: traffic.responses.append(
        (response.request.method, urlsplit(response.url).path, response.status)))
    context.on("console", lambda message: traffic.errors.append(message.text) if message.type == "error" else None)
    context.on("weberror", lambda error: traffic.errors.append(str(error.error)))
    return context, traffic


def open_page(context: BrowserContext, url: str) -> Page:
    """A page of ``context`` at ``url``, loaded with everything it links."""
    page = context.new_page()
    response = page.goto(url, wait_until="load")
    assert response is None or response.ok, f"{url}: {response.status}"
    return page


@dataclass
class Visit:
    """An open page and what its context fetched."""

    page: Page
    traffic: Traffic


# ---------------------------------------------------------------- serving a site


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # the context records every request; keep pytest's output clean


@contextlib.contextmanager
def serving(root: Path) -> Iterator[str]:
    """``root`` served over HTTP on 127.0.0.1 (an ephemeral port); yields its origin."""
    server = ThreadingHTTPServer((LOCAL_HOST, 0), functools.partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOCAL_HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# ---------------------------------------------------------------- reading a rendered page


@dataclass
class Cell:
    text: str
    classes: set[str]  # of the elements inside the cell


@dataclass
class Row:
    classes: set[str]
    cells: list[Cell]

    def texts(self) -> list[str]:
        return [cell.text for cell in self.cells]


@dataclass
class Table:
    """A table as a person reads it: the rendered text of each cell, and the classes that style it."""

    headers: list[str]
    rows: list[Row]

    def texts(self) -> list[list[str]]:
        return [row.texts() for row in self.rows]


READ_TABLE = """table => ({
  headers: [...table.querySelectorAll(":scope > thead th")].map(th => th.innerText),
  rows: [...table.querySelectorAll(":scope > tbody > tr")].map(tr => ({
    classes: [...tr.classList],
    cells: [...tr.cells].map(cell => ({
      text: cell.innerText,
      classes: [...cell.querySelectorAll("*")].flatMap(element => [...element.classList]),
    })),
  })),
})"""


def read_table(page: Page, css_class: str) -> Table:
    """The one ``table.css_class`` of ``page``, as rendered."""
    found = page.locator(f"table.{css_class}")
    assert found.count() == 1, f"expected one table.{css_class}, found {found.count()}"
    raw = found.evaluate(READ_TABLE)
    rows = [
        Row(set(row["classes"]), [Cell(norm(cell["text"]), set(cell["classes"])) for cell in row["cells"]])
        for row in raw["rows"]
    ]
    return Table([norm(header) for header in raw["headers"]], rows)


# What the stylesheet does to a page, as the browser computed it.
READ_STYLE = """() => {
  const style = (element, pseudo) => element && getComputedStyle(element, pseudo);
  const badge = outcome => {
    const element = document.querySelector(`span.outcome-${outcome}`);
    return element && {
      text: element.innerText.trim(),
      background: style(element).backgroundColor,
      border: style(element).borderTopStyle,
      borderWidth: style(element).borderTopWidth,
      mark: style(element.querySelector(".outcome-mark"), "::before").content,
    };
  };
  return {
    variable: style(document.documentElement).getPropertyValue("--band").trim(),
    font: style(document.body).fontFamily,
    band: style(document.querySelector(".site-header")).backgroundColor,
    paper: style(document.body).backgroundColor,
    ink: style(document.body).color,
    badges: Object.fromEntries(["ok", "failed", "cancelled"].map(outcome => [outcome, badge(outcome)])),
  };
}"""
TRANSPARENT = "rgba(0, 0, 0, 0)"


def computed_style(page: Page) -> dict[str, Any]:
    """The colours, font, badges and marks ``page`` shows, as Chromium computed them."""
    style: dict[str, Any] = page.evaluate(READ_STYLE)
    return style


def assert_styled(page: Page) -> None:
    """The site's stylesheet applied: its colours on the header band and on every outcome badge."""
    style = computed_style(page)
    assert style["variable"], "the stylesheet's colours are not defined on the page"
    assert "system-ui" in style["font"], style["font"]
    assert style["band"] != TRANSPARENT, "the header band has no colour"
    badges = {outcome: badge for outcome, badge in style["badges"].items() if badge is not None}
    assert set(badges) == {"ok", "failed", "cancelled"}, f"the page shows only {sorted(badges)} badges"
    backgrounds = [badge["background"] for badge in badges.values()]
    assert TRANSPARENT not in backgrounds and len(set(backgrounds)) == 3, badges
    assert all(badge["mark"] not in ("none", "normal", "") for badge in badges.values()), badges


def luminance(colour: str) -> float:
    """The WCAG relative luminance of a computed ``rgb(r, g, b)`` colour."""
    channels = [int(value) / 255 for value in colour[colour.index("(") + 1 : colour.index(")")].split(",")[:3]]
    linear = [value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4 for value in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    """The WCAG contrast ratio of two computed colours."""
    lighter, darker = sorted((luminance(first), luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)
