#!/usr/bin/env bash
# `make lab`, the one-command run: bring the lab up, check both targets end to end, bring it
# down. (The Airflow-driven conformance matrix and its report take this place once they land.)
set -uo pipefail
cd "$(dirname "$0")/.."
EOSLAB=.venv/bin/eoslab
$EOSLAB lab up || exit 1
$EOSLAB lab smoke
verdict=$?
$EOSLAB lab down
exit $verdict
