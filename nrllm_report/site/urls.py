"""Every page's path in the site and every link between pages, in one place.

A path is relative to the site's root (``en/runs/4711.html``); a link is relative
to the page it stands on, so the site works from any folder, over file:// too.
The links are written out for each place they are used (a run index row, a run
page's server) rather than computed, since some are made for every row.
"""

from __future__ import annotations

import posixpath

STYLESHEET = "assets/style.css"
WHOLE_RUN_STYLESHEET = "assets/whole-run.css"  # only where a site shows the whole run or denied calls
FAVICON = "assets/favicon.svg"
SUMMARY = "summary.json"
ROOT_INDEX = "index.html"
RUN_INDEX_STEM = "index"
PROBLEMS_STEM = "problems"
RUNS_WITH_FAILED_STEM = "runs-with-failed-calls"
RUNS_WITH_CANCELLED_STEM = "runs-with-cancelled-calls"
RUNS_FROM_LANGUAGE_FOLDER = "runs/"  # a run page's folder, from a page in the language's folder
# The lists of a server's runs: every run that called it, those with a failed and with a cancelled call.
SERVER_RUN_LISTS = ("runs", "failed", "cancelled")


CONFIGURATIONS_STEM = "configurations"


def configurations_page(language: str) -> str:
    return f"{language}/{CONFIGURATIONS_STEM}.html"


def run_page(language: str, slug: str) -> str:
    return f"{language}/runs/{slug}.html"


def server_page(language: str, slug: str) -> str:
    return f"{language}/servers/{slug}.html"


def servers_index(language: str) -> str:
    return f"{language}/servers/index.html"


def numbered(language: str, stem: str, *, number: int) -> str:
    """Page ``number`` of a paginated list (the run index, the problems): the first has no number."""
    return f"{language}/{stem}.html" if number == 1 else f"{language}/{stem}-{number}.html"


def language_index(language: str) -> str:
    return numbered(language, RUN_INDEX_STEM, number=1)


def problems_page(language: str) -> str:
    """The first page of the problems."""
    return numbered(language, PROBLEMS_STEM, number=1)


def day_stem(day: str) -> str:
    """The paginated list of the runs that started on ``day`` (ISO), in the language's ``days`` folder."""
    return f"days/{day}"


def server_runs_stem(slug: str, which: str) -> str:
    """One of a server's lists of runs (``SERVER_RUN_LISTS``), in a folder of the server's own:
    a slug may end in what looks like a page number, a folder name cannot be mistaken for one."""
    return f"servers/{slug}/{which}"


def tool_runs_stem(server_slug: str, tool_slug: str, which: str) -> str:
    """A tool's list of runs, in a folder of the tool's own in its server's folder, for the
    reason ``server_runs_stem`` gives."""
    return f"servers/{server_slug}/tools/{tool_slug}/{which}"


def runs_prefix_from(path: str) -> str:
    """The link from the page at ``path`` (in a language's folder or below) to the run pages' folder."""
    return "../" * (path.count("/") - 1) + RUNS_FROM_LANGUAGE_FOLDER


def page_file(slug: str) -> str:
    """A page's file in its folder: a run page's, linked from a list of runs after the runs' folder."""
    return f"{slug}.html"


def run_from_language_folder(slug: str) -> str:
    """A run page, linked from a page in the language's folder (the run index)."""
    return f"runs/{slug}.html"


def run_from_sibling_folder(slug: str) -> str:
    """A run page, linked from a page one folder down (a server page)."""
    return f"../runs/{slug}.html"


def server_from_sibling_folder(slug: str) -> str:
    """A server page, linked from a page one folder down (a run page)."""
    return f"../servers/{slug}.html"


def server_from_servers_index(slug: str) -> str:
    return f"{slug}.html"


def root_of(path: str) -> str:
    """The link from the page at ``path`` to the site's root folder (``../`` per level)."""
    return "../" * path.count("/")


def in_other_language(path: str, language: str) -> str:
    """The link from the page at ``path`` to the same page in ``language``."""
    rest = path.split("/", 1)[1] if "/" in path else path
    return f"{root_of(path)}{language}/{rest}"


def link(from_path: str, to_path: str) -> str:
    """The relative link between two pages of the site (the reference the helpers above agree with)."""
    return posixpath.relpath(to_path, posixpath.dirname(from_path) or ".")


def status_stem(status_slug: str) -> str:
    """The paginated list of the runs whose run row has a status (the slug of its value)."""
    return f"status/{status_slug}"


def configuration_stem(configuration_slug: str) -> str:
    """The paginated list of the runs of an agent configuration (the slug of its identifier), in a
    folder of its own beside the Configurations page: an identifier may end in what looks like a
    page number (``dev-assistant-2``), a folder name cannot be mistaken for one."""
    return f"{CONFIGURATIONS_STEM}/{configuration_slug}/runs"


FILTER_SCRIPT = "assets/filter.js"  # the run index's filter (issue 22)
FILTER_FOLDER = "filter"  # its data, shared by every language: an index and the shards of runs
FILTER_INDEX = f"{FILTER_FOLDER}/index.js"


def filter_shard(number: int) -> str:
    """A shard of the filter's runs: ``runs-000.js`` holds the oldest."""
    return f"{FILTER_FOLDER}/runs-{number:03d}.js"
