"""What every `eoslab` command prints with, and the options they share: one place for the
console, the error line, `--json`, `--runtime` and the counts (`--records`, ...).

A bad option value is refused like any bad input, with one ``error:`` line naming the option,
the value and what it takes (exit 2, as click's own usage errors), before the command starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from eoslab.settings import RUNTIME, RUNTIMES

console = Console()
errors = Console(stderr=True)

USAGE_ERROR = 2
"""The exit code of a refused option value (click's, for its own usage errors)."""


def _known_runtime(value: str) -> str:
    if value not in RUNTIMES:
        raise fail(
            f"unknown runtime {value!r} (--runtime, or ${RUNTIME}); "
            f"choose one of: {', '.join(RUNTIMES)}",
            code=USAGE_ERROR,
        )
    return value


RuntimeOption = Annotated[
    str,
    typer.Option(
        "--runtime",
        envvar=RUNTIME,
        callback=_known_runtime,
        help=f"Where the lab runs: {' or '.join(RUNTIMES)}.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _at_least_one(param: typer.CallbackParam, value: int | None) -> int | None:
    if value is not None and value < 1:
        name = max(param.opts, key=len)
        raise fail(f"{name} takes a positive count, not {value}", code=USAGE_ERROR)
    return value


def count_option(help_text: str, *names: str) -> Any:
    """An option that counts something (records, lines, replicas): a positive integer."""
    return typer.Option(*names, callback=_at_least_one, help=help_text)


def fail(problem: Exception | str, code: int = 1) -> typer.Exit:
    """Print ``error: <problem>`` on stderr, the problem as it is (a log line's brackets are
    no markup, a path is not wrapped); the exit to raise."""
    errors.print("[bold red]error:[/]", end=" ")
    errors.print(str(problem), markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def identifier_column(table: Table, header: str, values: list[str]) -> None:
    """A column of names a script may read back (a cell may hold several, one a line): never
    shortened nor wrapped, whatever the terminal's width (the other columns give way)."""
    lines = [line for value in (header, *values) for line in value.splitlines()]
    table.add_column(header, no_wrap=True, min_width=max((len(line) for line in lines), default=1))


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a log (reading only its end), for a message that says where
    to look; a note instead when there is no log."""
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - 200 * lines))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])
