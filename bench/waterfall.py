"""What the waterfall (issue 23) costs the run pages: bytes and CPU seconds, with and without it.

    python bench/waterfall.py EXPORT [--language en]

Builds EXPORT twice in this process (``--jobs 1``, no input cache): once as it is and once
with the waterfall left out, and prints the sum of the language's run pages' bytes in both,
and the CPU seconds spent in ``pages.run_page``, in the waterfall and in its columns. Make
an export with ``scripts/generate_export.py --runs 5000 --out X.parquet``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from nrllm_report.cli import main
from nrllm_report.site import pages, waterfall

SPENT: dict[str, float] = {}


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, adding the CPU seconds each call takes to ``SPENT[name]``."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + time.process_time() - began
    return wrapper


def build(export: Path, out: Path, language: str) -> int:
    """The export built into ``out``; the bytes of its run pages in ``language``."""
    result = CliRunner().invoke(main, ["build", str(export), "--out", str(out), "--jobs", "1", "--no-cache"])
    assert result.exit_code == 0, result.output
    return sum(path.stat().st_size for path in (out / language / "runs").glob("*.html"))


def main_() -> None:
    """Build the export without the waterfall and with it; print the bytes and the CPU seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--language", default="en")
    arguments = parser.parse_args()
    drawn = pages.waterfall_markup
    with tempfile.TemporaryDirectory(prefix="nrllm-waterfall-") as folder:
        pages.waterfall_markup = lambda *args, **kwargs: ""  # type: ignore[assignment]
        without = build(arguments.export, Path(folder) / "without", arguments.language)
        pages.waterfall_markup = timed("waterfall", drawn)  # type: ignore[assignment]
        pages.run_page = timed("run_page", pages.run_page)  # type: ignore[assignment]
        waterfall.StepColumns.__init__ = timed("columns", waterfall.StepColumns.__init__)  # type: ignore[method-assign]
        with_it = build(arguments.export, Path(folder) / "with", arguments.language)
    print(f"run pages ({arguments.language}): {without:,} bytes without the waterfall, {with_it:,} with it: "
          f"+{with_it - without:,} (+{(with_it - without) / without:.2%})")
    print("CPU seconds (with it): " + ", ".join(f"{name} {seconds:.3f}" for name, seconds in sorted(SPENT.items())))


if __name__ == "__main__":
    main_()
