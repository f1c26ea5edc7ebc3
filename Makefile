# eoslab — the two commands: `make lab` and `make test`. See README.md.
#
# `make lab up`, `make lab down` and `make lab status` are typed as two words: `lab` is then a
# prefix that does nothing, and the verb does the work. A bare `make lab` is the one-command run.

SHELL := /bin/bash
VENV := .venv
EOSLAB := $(VENV)/bin/eoslab
PYTEST_ARGS ?=

# RUNTIME=compose: the lab in containers (`make lab RUNTIME=compose`, `make lab up RUNTIME=compose`,
# ...); `make setup` then installs the Docker engine (EOSLAB_DOCKER=1, as `make test` sets it: the
# suite runs a compose lab). README, "Compose".
ifdef RUNTIME
export EOSLAB_RUNTIME := $(RUNTIME)
ifeq ($(RUNTIME),compose)
export EOSLAB_DOCKER := 1
endif
endif

.PHONY: setup lab up down status conformance test test-one lint bench soak clean

setup:
	@bash scripts/setup.sh

LAB_VERBS := up down status
ifneq ($(filter $(LAB_VERBS),$(MAKECMDGOALS)),)
lab:
	@:
else
lab: setup
	@bash scripts/lab_run.sh
endif

up: setup
	@$(EOSLAB) lab up

# The full matrix (every catalogue scenario on every target it names) through Airflow.
conformance: setup
	@MATRIX=full bash scripts/lab_run.sh

down: setup
	@$(EOSLAB) lab down

status: setup
	@$(EOSLAB) lab status

lint: setup
	$(VENV)/bin/ruff check src tests dags spark_jobs findings
	$(VENV)/bin/ruff format --check src tests dags spark_jobs findings
	$(VENV)/bin/mypy

# The suite in two halves at once, each a pytest session with a lab of its own
# (scripts/test.sh; README, Tests). With PYTEST_ARGS, one session runs them.
test: export EOSLAB_DOCKER := 1
test: setup lint
	@bash scripts/test.sh $(PYTEST_ARGS)

# The suite as one pytest session: slower, lighter on the machine.
test-one: export EOSLAB_DOCKER := 1
test-one: setup lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

bench: setup
	$(VENV)/bin/python -m eoslab.bench

# Reliability figures of the reference broker: malformed frames and kill -9 cycles (README).
soak: setup
	$(VENV)/bin/python -m eoslab.soak

clean:
	rm -rf $(VENV) services/kafka/lib services/kafka4/lib services/spark/jars .lab
