"""confluent-kafka 2.16.1: when a fatal error (here: a fenced transactional producer) is raised
while ``Producer.flush()`` serves delivery callbacks, flush goes on calling the callbacks with the
exception still set, and the next C-API call a callback makes fails with
``SystemError: <built-in function time_ns> returned a result with an exception set``: flush
raises that instead of the fatal error, and the callback that made the call never completes
(its delivery report is lost to the application).

Run with the project's virtualenv (it starts the project's reference broker on free loopback
ports, or uses ``--bootstrap HOST:PORT`` of any Kafka broker with transactions):

    .venv/bin/python findings/confluent-kafka-flush-systemerror/reproduce.py

Expected: "flush raised KafkaException ... _FENCED" (the fatal error), every delivery report
served; observed with 2.16.1: "flush raised SystemError".
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from importlib.metadata import version

from confluent_kafka import KafkaError, Producer, libversion
from confluent_kafka.admin import AdminClient, NewTopic

from eoslab.runtime.ports import free_port  # above the ephemeral range: no client's source port


def reference_broker() -> tuple[subprocess.Popen[bytes], str]:
    port, control = free_port(), free_port()
    broker = subprocess.Popen(
        [
            sys.executable, "-m", "eoslab.refbroker", "serve",
            f"--listen=127.0.0.1:{port}", f"--control=127.0.0.1:{control}",
            f"--data-dir={tempfile.mkdtemp(prefix='finding-')}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return broker, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    broker.kill()
    raise SystemExit(f"the reference broker did not start on 127.0.0.1:{port} in 30 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a broker of your own (default: the reference broker)")
    bootstrap = parser.parse_args().bootstrap
    broker = None
    if bootstrap is None:
        broker, bootstrap = reference_broker()
    try:
        topic, txn_id = f"finding-{uuid.uuid4().hex[:8]}", f"finding-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        reports: list[str] = []

        def delivered(error: KafkaError | None, _: object) -> None:
            time.time_ns()  # any C-API call: the one that fails
            reports.append("ok" if error is None else error.name())

        zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.produce(topic, b"first", on_delivery=delivered)
        zombie.flush(30)
        newer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        newer.init_transactions(30)  # fences the zombie
        for _ in range(100):
            zombie.produce(topic, b"late", on_delivery=delivered)
        try:
            left = zombie.flush(30)
            print(f"flush returned {left}")
        except Exception as raised:
            print(f"flush raised {type(raised).__name__}: {raised}")
        print(f"delivery reports served: {len(reports)} of 101 ({len(zombie)} left in the queue)")
        print(f"confluent-kafka {version('confluent-kafka')}, librdkafka {libversion()[0]}")
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
