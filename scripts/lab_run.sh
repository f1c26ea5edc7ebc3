#!/usr/bin/env bash
# `make lab` (default matrix) and `make conformance` (MATRIX=full): the one-command run.
# Brings the lab up with Airflow, runs the matrix on its scheduler (a lane per target, the
# targets' cells side by side; the UI shows them while they run), prints the report, brings the
# lab down whatever happened. LANES=0: the lab without Airflow's scheduler, the matrix through
# `airflow dags test eos_nightly` (one cell after the other). Exit: 0 every cell conforms, 3 a
# cell is invalid (a fault that did not take effect), 2 a cell does not conform, 1 the run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
MATRIX=${MATRIX:-default}
# TARGETS=kafka,refbroker (make lab TARGETS=...): only these targets come up and run
if [ -n "${TARGETS:-}" ]; then export EOSLAB_TARGETS=$TARGETS; fi
# CLIENTS=java,librdkafka (make lab CLIENTS=...): only the cells of these clients run
if [ -n "${CLIENTS:-}" ]; then export EOSLAB_CLIENTS=$CLIENTS; fi
# RUNTIME=compose (make lab RUNTIME=compose): the lab in containers, and the matrix through
# Airflow in a container beside it (eoslab.runtime.compose task)
if [ -n "${RUNTIME:-}" ]; then export EOSLAB_RUNTIME=$RUNTIME; fi
EOSLAB=.venv/bin/eoslab
PYTHON=.venv/bin/python

fail() { echo "lab: $*" >&2; exit 1; }

# LANES=0 (make lab LANES=0): one lane. The compose runtime runs its matrix in a container of
# its own through `airflow dags test`: one lane too.
lanes=${LANES:-1}
if [ "${EOSLAB_RUNTIME:-local}" = compose ]; then lanes=0; fi
if [ "$lanes" = 0 ]; then one_lane=--no-lanes; with_airflow=0; else one_lane=; with_airflow=1; fi

EOSLAB_WITH_AIRFLOW=$with_airflow $EOSLAB lab up \
  || fail "the lab did not come up (see above). If a previous lab is in the way: make lab down"
trap '$EOSLAB lab down >/dev/null || echo "lab: \`make lab down\` failed; stop it by hand" >&2' EXIT

matrix=(-m eoslab.orchestration.command matrix --matrix "$MATRIX" $one_lane ${VERBOSE:+--verbose})
if [ "${EOSLAB_RUNTIME:-local}" = compose ]; then
  $PYTHON -m eoslab.runtime.compose task -- python "${matrix[@]}"
else
  $PYTHON "${matrix[@]}"
fi
verdict=$?
case $verdict in
  0) echo "lab: every cell conforms" ;;
  2) echo "lab: at least one cell does NOT conform; see the report above" >&2 ;;
  3) echo "lab: at least one cell is INVALID (a fault did not take effect); see the report above" >&2 ;;
  *) echo "lab: the matrix could not run (exit $verdict); see the log named above" >&2 ;;
esac
exit $verdict
