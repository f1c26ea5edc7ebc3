"""What every `eoslab` command prints with, and the options they share: one place for the
console, the error line, `--json` and `--runtime`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from eoslab.settings import RUNTIME, RUNTIMES

console = Console()
errors = Console(stderr=True)

RuntimeOption = Annotated[
    str,
    typer.Option("--runtime", envvar=RUNTIME, help=f"Where the lab runs: {' or '.join(RUNTIMES)}."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def fail(problem: Exception | str, code: int = 1) -> typer.Exit:
    """Print ``error: <problem>`` on stderr, the problem as it is (a log line's brackets are
    no markup, a path is not wrapped); the exit to raise."""
    errors.print("[bold red]error:[/]", end=" ")
    errors.print(str(problem), markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def identifier_column(table: Table, header: str, values: list[str]) -> None:
    """A column of names a script may read back: never shortened nor wrapped, whatever the
    terminal's width (the other columns give way)."""
    table.add_column(
        header, no_wrap=True, min_width=max((len(v) for v in (header, *values)), default=1)
    )


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
