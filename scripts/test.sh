#!/usr/bin/env bash
# make test: the suite in two halves at once, each a pytest session with a lab of its
# own (ports offset by 1000 and by 7000, temporary folders of its own). Most of a lab test is
# waiting — producers at their rate, faults at their durations, session timeouts — so two labs
# side by side on two cores overlap their waits; memory allows it (about 9 GB a half at its
# peak, 24 GB here). The first half holds the tests of the lab's Kafka 4 (only its lab starts
# Kafka 4) and the catalogue's cells; the second everything else (the compose lab's test
# among it: it runs a lab of its own). Each half's lines are prefixed with its letter; both
# summaries, the tests each failed and the lab tests each ran again are printed again at the
# end. With arguments (PYTEST_ARGS), one session runs them, as plain pytest would.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=.venv/bin/pytest

# The labs' ports (bases up to 39090, offsets up to 9500) lie in the kernel's ephemeral range
# (32768-60999): an outgoing connection of one lab's clients can hold a port another lab is
# about to listen on, and that lab's start fails "port in use" (the clean-clone run of stop 39:
# refbroker:38692 and :37692, for a minute). As root, the ports below 49152 are reserved from
# ephemeral use while the tests run (ip_local_reserved_ports: a listen still binds them; the
# outgoing connections use 49152-60999), and the value before is put back on exit.
RESERVED=/proc/sys/net/ipv4/ip_local_reserved_ports
if [ -w "$RESERVED" ]; then
  before=$(cat "$RESERVED")
  trap 'echo "$before" > "$RESERVED"' EXIT
  echo "32768-49151${before:+,$before}" > "$RESERVED" \
    || echo "test: could not reserve the labs' ports from ephemeral use" >&2
fi
if [ $# -gt 0 ]; then "$PYTEST" "$@"; exit; fi

HALF_A=(
  tests/scenarios/test_catalogue.py
  tests/scenarios/test_kafka4_runs.py
  tests/scenarios/test_client_cells.py
  tests/scenarios/test_external_runs.py
  tests/probe/test_three_way_diff.py
  tests/runtime/test_kafka4.py
  tests/soak/test_kafka_cycles.py
  tests/refbroker/test_txn_java_client_4.py
  tests/workload/test_kafka4_consumers.py
  tests/workload/test_drivers.py
  tests/workload/test_franz_go_driver.py
)
ignored=()
for path in "${HALF_A[@]}"; do ignored+=("--ignore=$path"); done
logs=$(mktemp -d "${TMPDIR:-/tmp}/eoslab-test.XXXXXX")

half() {  # letter, port offset, pytest arguments...
  local letter=$1 offset=$2; shift 2
  EOSLAB_TEST_PORT_OFFSET=$offset EOSLAB_TEST_EVENTS="$logs/$letter.events" \
    "$PYTEST" --basetemp="$logs/tmp-$letter" "$@" \
    > >(tee "$logs/$letter.log" | sed -u "s/^/[$letter] /") 2>&1
}

# A half whose pytest died before its labs' teardown (an INTERNALERROR, or a SIGTERM, skips
# the fixtures' finalizers) leaves them running, and their ports refuse the next run's labs:
# what is left is killed, by the marker every lab process carries, and a compose lab's
# containers removed, by the project of its folder; each named.
sweep() {  # letter
  local left
  left=$(.venv/bin/python -c 'import sys; from pathlib import Path
from eoslab.runtime.compose import remove_left_behind
from eoslab.runtime.processes import kill_left_behind
root = Path(sys.argv[1])
killed, removed = kill_left_behind(root), remove_left_behind(root)
print("; ".join(what + " " + " ".join(names)
                for what, names in (("killed", killed), ("removed", removed)) if names))' \
    "$logs/tmp-$1")
  [ -z "$left" ] || echo "== half $1 left its labs running: $left"
}

# Stopped from outside (CI's time limit, ^C): the halves' summaries may never be printed, so
# each half's test running then, its failures and reruns so far and its slowest tests (written
# as they happen, tests/conftest.py) are printed; then the halves are interrupted as ^C would
# (each tears its lab down and prints what it can), and once they have ended the same lines
# are printed again, to be the last.
progress() {
  local events
  for letter in a b; do
    events=$logs/$letter.events
    touch "$events"
    echo "== half $letter stopped after $SECONDS s, $(grep -c '^running ' "$events") tests begun;" \
      "$(grep '^running ' "$events" | tail -1)"
    grep -E '^(failed|rerun) ' "$events" | cut -c1-300
    echo "   its slowest: $(grep '^took ' "$events" | sort -k2 -rn | head -6 \
      | awk '{n=split($5, p, "::"); printf "%s s %s; ", $2, p[n]}')"
  done
}
stopped() {
  trap - TERM INT
  progress
  pkill -INT -f -- "--basetemp=$logs/tmp-"
  wait
  sweep a
  sweep b
  progress
  exit 143
}

half a 1000 "${HALF_A[@]}" &
a=$!
half b 7000 tests "${ignored[@]}" &
b=$!
trap stopped TERM INT
wait $a; status_a=$?
wait $b; status_b=$?
sweep a
sweep b
for letter in a b; do
  echo "== half $letter: $(grep -E '^=+ .*(passed|failed|error).* in ' "$logs/$letter.log" | tail -1)"
  grep -E '^(FAILED|ERROR) ' "$logs/$letter.log"  # what failed, each with its first line
  # the lab tests it ran again (tests/conftest.py), each with its first failure
  awk '/^=+ lab tests run again/ {on=1; print; next} on && /^=+ / {on=0} on' "$logs/$letter.log"
done
[ $status_a -eq 0 ] && [ $status_b -eq 0 ] && rm -rf "$logs"
exit $(( status_a != 0 ? status_a : status_b ))
