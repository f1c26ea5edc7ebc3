"""The malformed-input soak: mutated frames at one reference broker process while the witness
producer keeps writing to it; the broker's memory sampled and its liveness checked throughout."""

from __future__ import annotations

import contextlib
import itertools
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from eoslab.background import Background
from eoslab.soak.broker import BrokerProcess, ProxyProcess, ServerProcess
from eoslab.soak.committer import Committer, committed_offset
from eoslab.soak.frames import send_frames
from eoslab.soak.mutator import FUZZ_TOPICS, Frame, FrameMutator
from eoslab.soak.witness import WITNESS_TOPIC, WitnessProducer

SAMPLE_INTERVAL_S = 0.5
LIVENESS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MalformedParams:
    frames: int
    seed: int = 0
    workers: int = 8
    timeout_s: float = 5.0
    max_seconds: float = 600.0
    """No frame is sent after this long: the soak is bounded in time as well as in count."""
    witness_rate: float = 200.0
    via_proxy: bool = False


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
class Watch(Background):
    """A thread sampling a server's RSS and whether it answers ApiVersions on a fresh connection
    (through the proxy: the proxy and the broker behind it)."""

    server: ServerProcess
    rss: list[int] = field(default_factory=list)
    liveness_checks: int = 0
    liveness_failures: int = 0
    max_liveness_s: float = 0.0
    failures_at_s: list[float] = field(default_factory=list)
    """When each failed check began, in seconds from the watch's start."""

    thread_name: ClassVar[str] = "soak-watch"

    def __enter__(self) -> Watch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        started = time.monotonic()
        next_liveness = 0.0
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            if (rss := self.server.rss_bytes()) is not None:
                self.rss.append(rss)
            if time.monotonic() >= next_liveness:
                begin = time.monotonic()
                self.liveness_checks += 1
                if not self.server.answers(LIVENESS_TIMEOUT_S):
                    self.liveness_failures += 1
                    self.failures_at_s.append(round(begin - started, 1))
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


def server_figures(server: ServerProcess, watch: Watch, alive: bool) -> dict[str, object]:
    cpu = server.cpu_seconds()
    return {
        "crashes": 0 if alive else 1,
        "cpu_seconds": None if cpu is None else round(cpu, 1),
        "liveness": {
            "checks": watch.liveness_checks,
            "failures": watch.liveness_failures,
            "max_seconds": round(watch.max_liveness_s, 3),
            "failures_at_s": watch.failures_at_s,
        },
        "memory": watch.memory(),
    }


def run_malformed(params: MalformedParams, workdir: Path) -> dict[str, object]:
    """The frames at the reference broker, or (``params.via_proxy``) through a chaos proxy
    routed to it; the witness producer writes to the broker directly either way."""
    phase = workdir / ("via-proxy" if params.via_proxy else "direct")
    phase.mkdir(parents=True)
    broker = BrokerProcess(phase)
    proxy = ProxyProcess(phase, upstream=broker.port) if params.via_proxy else None
    cpu_before = time.process_time()
    broker.start()
    try:
        if proxy is not None:
            proxy.start()
        broker.create_topics((*FUZZ_TOPICS, WITNESS_TOPIC))
        served = broker.served_versions()
        mutator = FrameMutator(params.seed, served)
        witness = WitnessProducer(broker.bootstrap, params.witness_rate)
        committer = Committer(broker.bootstrap)
        servers: list[ServerProcess] = [broker] if proxy is None else [proxy, broker]
        with contextlib.ExitStack() as stack:
            watches = [stack.enter_context(Watch(server)) for server in servers]
            witness.start()
            committer.start()
            frames = _until(mutator, params.frames, params.max_seconds)
            tally, unresponsive, seconds = send_frames(
                servers[0].port, frames, params.timeout_s, params.workers
            )
            witness.stop()
            committer.stop()
        figures = {
            server.name: server_figures(server, watch, server.alive())
            for server, watch in zip(servers, watches, strict=True)
        }
        if proxy is not None:
            figures[proxy.name]["exit_code_on_sigterm"] = proxy.stop()
        if not broker.alive():  # a crash is the finding; the witness is still read back after it
            broker.start()
        with broker.client(30.0) as client:
            witness_check = witness.check(client)
        group = {
            **committer.figures(),
            "committed_offset_at_end": committed_offset(broker.bootstrap),
        }
        figures[broker.name]["exit_code_on_sigterm"] = broker.stop()
        errors = internal_errors(broker.log_path)
    finally:
        for server in (proxy, broker):
            if server is not None and server.alive():
                server.kill()
    return {
        "target": "proxy -> refbroker" if proxy is not None else "refbroker",
        "parameters": {**params.__dict__, "apis": len(served), "api_versions": len(mutator.apis)},
        "frames": tally.frames,
        "seconds": round(seconds, 1),
        "frames_per_s": round(tally.frames / seconds, 1),
        "connections": tally.connections,
        "soak_cpu_seconds": round(time.process_time() - cpu_before, 1),
        "outcomes": dict(tally.outcomes),
        "failures": tally.failures,
        "unresponsive_during_silence": unresponsive,
        "by_mutation": {name: dict(counts) for name, counts in sorted(tally.by_mutation.items())},
        "by_api": dict(sorted(tally.by_api.items())),
        "servers": figures,
        "internal_errors": sum(errors.values()),
        "internal_error_messages": dict(errors.most_common(20)),
        "witness": witness_check.figures(),
        "consumer_group": group,
        "findings": tally.findings,
        "explained_silences": tally.examples,
    }
