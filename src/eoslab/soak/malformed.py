"""The malformed-input soak: mutated frames at one reference broker process while the ledger
producer keeps writing to it; the broker's memory sampled and its liveness checked throughout."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from eoslab.soak.broker import BrokerProcess
from eoslab.soak.frames import send_frames
from eoslab.soak.ledger import LEDGER_TOPIC, LedgerProducer
from eoslab.soak.mutator import FUZZ_TOPICS, Frame, FrameMutator

SAMPLE_INTERVAL_S = 0.5
LIVENESS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MalformedParams:
    frames: int
    seed: int = 0
    workers: int = 8
    timeout_s: float = 5.0
    max_seconds: float = 1100.0
    """No frame is sent after this long: the soak is bounded in time as well as in count."""
    ledger_rate: float = 200.0


def _until(frames: Iterator[Frame], count: int, seconds: float) -> Iterator[Frame]:
    deadline = time.monotonic() + seconds
    for frame in itertools.islice(frames, count):
        if time.monotonic() > deadline:
            return
        yield frame


def internal_errors(log: Path) -> Counter[str]:
    """The broker's ERROR lines (internal errors: bugs of ours), by message."""
    if not log.is_file():
        return Counter()
    found: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        if " ERROR " in line:
            message = line.split(" ERROR ", 1)[1]
            found[re.sub(r"\('127\.0\.0\.1', \d+\)", "<peer>", message)] += 1
    return found


@dataclass
class Watch:
    """A thread sampling the broker's RSS and whether it answers a fresh connection."""

    broker: BrokerProcess
    rss: list[int] = field(default_factory=list)
    liveness_checks: int = 0
    liveness_failures: int = 0
    max_liveness_s: float = 0.0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-watch", daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        next_liveness = 0.0
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            if (rss := self.broker.rss_bytes()) is not None:
                self.rss.append(rss)
            if time.monotonic() >= next_liveness:
                begin = time.monotonic()
                self.liveness_checks += 1
                if not self.broker.answers(LIVENESS_TIMEOUT_S):
                    self.liveness_failures += 1
                self.max_liveness_s = max(self.max_liveness_s, time.monotonic() - begin)
                next_liveness = time.monotonic() + 2.0

    def memory(self) -> dict[str, object]:
        """Max RSS and growth from the first quarter of the samples to the last."""
        if not self.rss:
            return {"samples": 0}
        quarter = max(1, len(self.rss) // 4)
        first = sum(self.rss[:quarter]) / quarter
        last = sum(self.rss[-quarter:]) / quarter
        return {
            "samples": len(self.rss),
            "max_rss_mb": round(max(self.rss) / 2**20, 1),
            "first_quarter_rss_mb": round(first / 2**20, 1),
            "last_quarter_rss_mb": round(last / 2**20, 1),
            "growth_ratio": round(last / first, 3),
        }


def run_malformed(params: MalformedParams, workdir: Path) -> dict[str, object]:
    broker = BrokerProcess(workdir / "malformed" / "data")
    broker.data_dir.mkdir(parents=True)
    broker.start()
    try:
        broker.create_topics((*FUZZ_TOPICS, LEDGER_TOPIC))
        served = broker.served_versions()
        mutator = FrameMutator(params.seed, served)
        ledger = LedgerProducer(broker.bootstrap, params.ledger_rate)
        with Watch(broker) as watch:
            ledger.start()
            frames = _until(mutator, params.frames, params.max_seconds)
            tally, unresponsive, seconds = send_frames(
                broker.port, frames, params.timeout_s, params.workers
            )
            ledger.stop()
        alive = broker.alive()
        broker_cpu_s = broker.cpu_seconds()
        if not alive:  # a crash is the finding; the ledger is still read back after a restart
            broker.start()
        with broker.client(30.0) as client:
            ledger_check = ledger.check(client)
        exit_code = broker.stop()
        errors = internal_errors(broker.log_path)
    finally:
        if broker.alive():
            broker.kill()
    return {
        "parameters": {**params.__dict__, "apis": len(served), "api_versions": len(mutator.apis)},
        "frames": tally.frames,
        "seconds": round(seconds, 1),
        "frames_per_s": round(tally.frames / seconds, 1),
        "connections": tally.connections,
        "broker_cpu_seconds": None if broker_cpu_s is None else round(broker_cpu_s, 1),
        "soak_cpu_seconds": round(time.process_time(), 1),
        "outcomes": dict(tally.outcomes),
        "failures": tally.failures,
        "broker_unresponsive": unresponsive,
        "by_mutation": {name: dict(counts) for name, counts in sorted(tally.by_mutation.items())},
        "by_api": dict(sorted(tally.by_api.items())),
        "crashes": 0 if alive else 1,
        "internal_errors": sum(errors.values()),
        "internal_error_messages": dict(errors.most_common(20)),
        "broker_exit_code_on_sigterm": exit_code,
        "liveness": {
            "checks": watch.liveness_checks,
            "failures": watch.liveness_failures,
            "max_seconds": round(watch.max_liveness_s, 3),
        },
        "memory": watch.memory(),
        "ledger": ledger_check.figures(),
        "findings": tally.findings,
    }
