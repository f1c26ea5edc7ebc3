"""`python -m eoslab.refbroker [serve] ...`: the broker without the console script."""

from eoslab.refbroker.command import app

app(prog_name="python -m eoslab.refbroker")
