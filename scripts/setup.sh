#!/usr/bin/env bash
# make setup: one virtualenv, the Kafka 3.9 and Kafka 4 jars and Spark's Kafka connector.
# Idempotent: every step is skipped while its stamp is newer than its inputs,
# so a re-run with everything present takes seconds.
# Quiet: one line per step. The tools' own output (apt's, debconf's, pip's, Maven's) goes to a
# log, shown (its last lines, without terminal escape codes) only when the step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=.venv
KAFKA_LIB=services/kafka/lib
KAFKA4_LIB=services/kafka4/lib
SPARK_JARS=services/spark/jars
MVN=(mvn -q -B --no-transfer-progress -Dstyle.color=never -s services/maven-settings.xml)
SETUP_LOG=$(mktemp "${TMPDIR:-/tmp}/eoslab-setup.XXXXXX")
trap 'rm -f "$SETUP_LOG"' EXIT

fail() { echo "setup: $*" >&2; exit 1; }
fresh() { [ -f "$1" ] && [ -z "$(find "${@:2}" -newer "$1" 2>/dev/null)" ]; }
quietly() {  # what failed (the error line), command...: its output only if it fails
  local what=$1; shift
  if ! "$@" >"$SETUP_LOG" 2>&1; then
    # Maven 3.8 writes colour resets even with style.color=never
    sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$SETUP_LOG" | tail -n 30 >&2
    trap - EXIT
    fail "$what (the last lines of its output are above; all of it is in $SETUP_LOG)"
  fi
}

# --- prerequisites, each with the fix ------------------------------------------------
command -v "$PYTHON" >/dev/null \
  || fail "Python 3.11 not found as '$PYTHON'. Install it (e.g. apt-get install python3.11 python3.11-venv) or set PYTHON=/path/to/python3.11."
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || fail "'$PYTHON' is $("$PYTHON" -V 2>&1), eoslab needs Python 3.11. Set PYTHON=/path/to/python3.11."
command -v java >/dev/null \
  || fail "Java not found. Install a JDK 17 (e.g. apt-get install openjdk-17-jdk-headless)."
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[ "${java_major:-0}" -ge 17 ] 2>/dev/null \
  || fail "Java ${java_major:-?} found, Kafka 3.9, Kafka 4 and Spark 4 need Java 17. Install openjdk-17-jdk-headless and put it first on PATH."
command -v mvn >/dev/null \
  || fail "Maven not found; it fetches the Kafka and Spark jars. Install it (e.g. apt-get install maven)."

# --- system tools the tests use: docker-compose validates the compose file without an engine,
# headless chromium renders the reports, kcat is one of the group consumers the reference
# broker is tested with, PostgreSQL serves the consumer half's sink
apt_get_install() {  # package: from the lists as they are, else after an update
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l NEEDRESTART_SUSPEND=1
  apt-get install -y -qq "$1" || { apt-get update -qq && apt-get install -y -qq "$1"; }
}
apt_install() {  # package, what it is for
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing $1 (for $2)"
    quietly "apt-get could not install $1 (for $2)." apt_get_install "$1"
  else
    echo "setup: warning: $1 is missing ($2); install it, e.g. sudo apt-get install $1" >&2
  fi
}
command -v docker-compose >/dev/null || apt_install docker-compose "checking compose/docker-compose.yml"
command -v chromium >/dev/null || apt_install chromium "rendering the HTML reports in the report tests"
command -v kcat >/dev/null || apt_install kcat "the kcat group consumer tests"
NFQUEUE_HEADER=/usr/include/libnetfilter_queue/libnetfilter_queue.h
[ -f "$NFQUEUE_HEADER" ] || apt_install libnetfilter-queue-dev "slow links inside the cluster (link-delay)"
# Debian keeps the PostgreSQL server off PATH, in /usr/lib/postgresql/<version>/bin
command -v postgres >/dev/null || compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null \
  || apt_install postgresql "the consumer workload's PostgreSQL sink (eoslab.runtime.postgres)"

# --- docker: the compose runtime's engine (README, "Compose"), when it is asked for:
# EOSLAB_DOCKER=1 (`make test` sets it, the suite runs a compose lab) or EOSLAB_RUNTIME=compose
# (`make ... RUNTIME=compose`). Debian's docker.io, and debootstrap for the images' Debian base
# where Docker Hub cannot be reached; eoslab starts the engine when it is not running.
if [ "${EOSLAB_DOCKER:-0}" = 1 ] || [ "${EOSLAB_RUNTIME:-}" = compose ]; then
  command -v dockerd >/dev/null || apt_install docker.io "the compose runtime's Docker engine"
  command -v debootstrap >/dev/null || apt_install debootstrap "the compose images' Debian base"
fi
# --- end of docker

# --- the franz-go group consumer the tests build (tests/refbroker/franzgo): its modules
if command -v go >/dev/null; then
  if ! fresh tests/refbroker/franzgo/.downloaded tests/refbroker/franzgo/go.sum tests/refbroker/franzgo/go121.sum; then
    echo "setup: downloading the franz-go modules (the current franz-go and 1.21.0)"
    quietly "go could not download the franz-go modules." \
      bash -c 'cd tests/refbroker/franzgo && go mod download && go mod download -modfile=go121.mod'
    touch tests/refbroker/franzgo/.downloaded
  fi
else
  echo "setup: warning: go is missing; the franz-go group consumer test needs it" >&2
fi

# --- virtualenv -------------------------------------------------------------------------
if ! fresh "$VENV/.installed" pyproject.toml; then
  echo "setup: installing the virtualenv in $VENV (pinned dependencies, a few minutes the first time)"
  [ -x "$VENV/bin/python" ] || quietly "$PYTHON could not create $VENV." "$PYTHON" -m venv "$VENV"
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
  quietly "pip could not upgrade itself." "$VENV/bin/pip" install -q --upgrade pip
  extras=dev
  [ -f "$NFQUEUE_HEADER" ] && extras=dev,netfaults  # else link-delay steps say what is missing
  quietly "pip could not install the pinned dependencies." "$VENV/bin/pip" install -q -e ".[$extras]"
  quietly "the pinned dependencies conflict." "$VENV/bin/pip" check
  touch "$VENV/.installed"
fi

# --- older librdkafka releases a scenario may run its roles on (eoslab.workload.drivers.librdkafka):
# confluent-kafka at that version (its wheel bundles librdkafka), in a folder of its own
for pin in $("$VENV/bin/python" -c 'from eoslab.workload.drivers.librdkafka import OLDER_CLIENTS; print(" ".join(OLDER_CLIENTS.values()))'); do
  target=".venv-clients/${pin/==/-}"
  if [ ! -d "$target/confluent_kafka" ]; then
    echo "setup: installing $pin for the scenarios that run an older librdkafka"
    "$VENV/bin/pip" install -q --no-deps --target "$target" "$pin" || fail "pip could not install $pin."
  fi
done

# --- the client drivers the default matrix runs (Kafka's Java client, franz-go): built once per
# version into .venv-clients/ (eoslab.workload.drivers); other versions are built on first use
if ! fresh .venv-clients/.default-drivers services/clients src/eoslab/orchestration/matrix.py; then
  default_clients=$("$VENV/bin/python" -c 'from eoslab.orchestration.matrix import DEFAULT_CELLS; print(" ".join(sorted({c.client for c in DEFAULT_CELLS if c.client})))')
  # shellcheck disable=SC2086  # one word per client
  "$VENV/bin/eoslab" clients prepare $default_clients | sed 's/^clients: /setup: /' \
    || fail "the default matrix's client drivers could not be built (the line above says why)."
  touch .venv-clients/.default-drivers
fi

# --- jars -------------------------------------------------------------------------------
fetch_jars() {  # pom, output folder, extra maven args...
  local pom=$1 out=$2; shift 2
  if ! fresh "$out/.fetched" "$pom" services/maven-settings.xml; then
    echo "setup: fetching jars for $pom into $out"
    rm -rf "$out"
    quietly "Maven could not fetch the jars of $pom." \
      "${MVN[@]}" -f "$pom" "$@" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$PWD/$out"
    touch "$out/.fetched"
  fi
}
fetch_jars services/kafka/pom.xml "$KAFKA_LIB"
fetch_jars services/kafka4/pom.xml "$KAFKA4_LIB"
spark_version=$("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)')
grep -q "<spark.version>$spark_version</spark.version>" services/spark/pom.xml \
  || fail "services/spark/pom.xml must pin spark.version $spark_version, the installed pyspark."
fetch_jars services/spark/pom.xml "$SPARK_JARS"

echo "setup: ready ($VENV, $KAFKA_LIB, $KAFKA4_LIB, $SPARK_JARS)"
