"""franz-go v1.22.2: a Produce answered CONCURRENT_TRANSACTIONS waits for a metadata refresh,
which franz-go holds back until ``MetadataMinAge`` (5 s by default) after the last one, so the
partition's records stall for up to 5 s. Under KIP-890 (transaction.version 2, Kafka 4's
default) a transaction's first Produce to a partition adds it to the transaction, and the
broker answers CONCURRENT_TRANSACTIONS whenever the previous transaction's markers are still
being written: every such transaction stalls.

The reproducer puts the project's chaos proxy in front of the project's reference broker and
has it answer one Produce with CONCURRENT_TRANSACTIONS (the broker never sees it), then
produces one record with franz-go three ways, and with librdkafka for comparison:

    .venv/bin/python findings/franz-go-concurrent-transactions-stall/reproduce.py

Expected: the record acknowledged after one retry backoff (librdkafka: ~100 ms); observed with
franz-go's defaults: ~5 s, the time to the next metadata refresh it allows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer, libversion

from eoslab.proxy.control_client import ProxyControl
from eoslab.runtime.fronting import FrontingProxy
from eoslab.soak.broker import BrokerProcess

FRANZ_GO = "v1.22.2"
HERE = Path(__file__).resolve().parent
FAULT = {
    "kind": "error",
    "api": "Produce",
    "error": "CONCURRENT_TRANSACTIONS",
    "mode": "reject",
    "count": 1,
}


def build(workdir: Path) -> Path:
    """reproduce.go against franz-go FRANZ_GO, as a user's module would get it."""
    src = workdir / "src"
    src.mkdir()
    shutil.copy(HERE / "reproduce.go", src / "main.go")
    (src / "go.mod").write_text("module reproduce\n\ngo 1.24\n")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    for step in (
        ["go", "get", f"github.com/twmb/franz-go@{FRANZ_GO}"],
        ["go", "mod", "tidy"],
        ["go", "build", "-o", str(workdir / "reproduce"), "."],
    ):
        done = subprocess.run(step, cwd=src, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(step)} failed: {done.stderr.strip()}")
    return workdir / "reproduce"


def franz_go(program: Path, bootstrap: str, topic: str, *age: str) -> str:
    done = subprocess.run(
        [str(program), bootstrap, topic, *age],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    printed = done.stdout.strip()
    if "metadata update triggered; why: produce request had retry batches" in done.stderr:
        printed += "; retried after a metadata refresh"
    return printed


def librdkafka(bootstrap: str, topic: str) -> str:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.list_topics(topic, timeout=10)  # metadata first, as franz-go's first Produce has
    start = time.monotonic()
    producer.produce(topic, b"one")
    if producer.flush(30) != 0:
        return "not acknowledged in 30 s"
    return f"acknowledged after {round((time.monotonic() - start) * 1000)} ms"


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="finding-"))
    broker = BrokerProcess(workdir)
    broker.start()
    proxy = None
    try:
        program = build(workdir)
        broker.create_topics(("one", "two", "three", "four"))
        proxy = FrontingProxy.start(
            broker.bootstrap, workdir / "proxy.log", workdir / "faults.jsonl", seed=0
        )
        bootstrap, faults = proxy.bootstrap, ProxyControl(proxy.control_url)

        def once(label: str, produce: Callable[[], str]) -> None:
            """``produce`` with the proxy answering its first Produce CONCURRENT_TRANSACTIONS."""
            fault = faults.add(FAULT)
            printed = produce()
            injected = faults.fault(fault)["injected"]
            assert injected == 1, f"{label}: the proxy answered {injected} Produce requests, not 1"
            print(f"{label}, CONCURRENT_TRANSACTIONS once: {printed}", flush=True)

        go = f"franz-go {FRANZ_GO}"
        once(f"{go}, MetadataMinAge 5s (its default)", lambda: franz_go(program, bootstrap, "one"))
        once(f"{go}, MetadataMinAge 100ms", lambda: franz_go(program, bootstrap, "two", "100ms"))
        print(f"{go}, no error: {franz_go(program, bootstrap, 'three')}")
        once(f"librdkafka {libversion()[0]}", lambda: librdkafka(bootstrap, "four"))
    finally:
        if proxy is not None:
            proxy.stop()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
