"""The command's entry point, ``python -m nrllm_report`` and ``nrllm-report``: signals first, then the rest.

The handlers are installed before the command line (and with it pyarrow) is imported, so a
Ctrl-C or SIGTERM at any point ends the command with one line and 130, 143 or 129.
"""

from __future__ import annotations

import sys

from .core.interrupts import Interrupted, stop_on_signals


def run() -> None:
    """Run the command line; a stopping signal ends it with one line on stderr and 128 + the signal."""
    stop_on_signals()
    try:
        from .cli import main

        main()
    except Interrupted as stop:
        sys.stderr.write(f"Interrupted by {stop.name}.\n")
        sys.exit(stop.exit_code)


if __name__ == "__main__":
    run()
