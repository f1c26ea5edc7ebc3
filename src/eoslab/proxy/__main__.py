"""`python -m eoslab.proxy --route NAME=LISTEN=UPSTREAM ...`: the command the lab runtime starts
(it waits for the line starting with "ready"); `eoslab chaos proxy` is the same command."""

import typer

from eoslab.proxy.command import run_proxy

typer.run(run_proxy)
