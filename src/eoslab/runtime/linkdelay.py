"""Slow links: the packets a rule of the lab's chain queues (``-j NFQUEUE``), each held for a
delay (plus or minus a seeded jitter, as netem would: jitter may reorder them), then let go.

This kernel has no ``sch_netem`` (``tc qdisc ... netem`` is refused), so a delay is a program:
``python -m eoslab.runtime.linkdelay`` binds the first free netfilter queue from the one it is
given (NetfilterQueue, libnetfilter_queue's binding, metadata only: the payload stays in the
kernel), says ``ready queue=N``, and holds what that queue receives. The rules that feed it
carry ``--queue-bypass``: once the program is gone, however it went, the kernel lets the packets
through undelayed instead of dropping them. It lets everything it holds go and exits on SIGTERM
(:meth:`Delayer.stop`, after the rules are gone), when its parent is gone (the nemesis died), or
at its deadline, and prints its tally (packets held, mean and longest hold) as its last line.

:class:`Delayer` is the nemesis's handle on one such program.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
QUEUES_TRIED = 64
"""How many queue numbers from the first one the program tries to bind (another lab's, or
another step's delay, holds the others)."""
MAX_QUEUED = 4096
"""Packets the kernel keeps queued for the program before it drops more (TCP resends them)."""
POLL_S = 0.2
"""How long the program sleeps at most between looks at its parent and its deadline."""


class DelayError(RuntimeError):
    """A delay could not start (no NetfilterQueue, no free queue) or stop; the message says why."""


def unavailable() -> str | None:
    """Why this machine cannot slow a link, or None when it can."""
    try:
        import netfilterqueue  # noqa: F401
    except ImportError:
        return (
            "slow links need NetfilterQueue (libnetfilter_queue's binding: `make setup` as root "
            "installs it with Debian's libnetfilter-queue-dev)"
        )
    return None


@dataclass(frozen=True)
class Tally:
    """What a delay did: packets held, and how long on average and at most."""

    held: int
    mean_ms: float
    max_ms: float

    def __str__(self) -> str:
        return f"{self.held} packets held, {self.mean_ms:.0f} ms on average, {self.max_ms:.0f} ms at most"


class Delayer:
    """One running delay program, bound to :attr:`queue`."""

    def __init__(self, process: subprocess.Popen[str], queue: int) -> None:
        self.process = process
        self.queue = queue

    @classmethod
    def start(
        cls, first_queue: int, delay_ms: float, jitter_ms: float, seed: str, lifetime_s: float
    ) -> Delayer:
        """Start a delay program; returns once it is bound to its queue (its ``ready`` line)."""
        why = unavailable()
        if why is not None:
            raise DelayError(why)
        argv = [sys.executable, "-m", __name__, "--first-queue", str(first_queue)]
        argv += ["--delay-ms", str(delay_ms), "--jitter-ms", str(jitter_ms), "--seed", seed]
        argv += ["--lifetime-s", str(lifetime_s)]
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_S)
        line = process.stdout.readline() if ready else ""
        if not line.startswith("ready queue="):
            process.kill()
            _, err = process.communicate(timeout=STOP_TIMEOUT_S)
            last = (err.strip().splitlines() or ["no output"])[-1]
            raise DelayError(f"the link delay did not start: {last}")
        return cls(process, int(line.split("=", 1)[1]))

    def stop(self) -> Tally | None:
        """Let every held packet go, end the program; its tally (None if it died before)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            out, _ = self.process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return Tally(**json.loads(lines[-1])) if lines else None


class _Holder:
    """The program's state: packets held until their time, and the tally."""

    def __init__(self, delay_ms: float, jitter_ms: float, seed: str) -> None:
        self.delay_s = delay_ms / 1000
        self.jitter_s = jitter_ms / 1000
        self.random = random.Random(seed)
        self.held: list[tuple[float, int, Any]] = []
        self.count = 0
        self.total_s = 0.0
        self.longest_s = 0.0

    def receive(self, packet: Any) -> None:
        hold = max(0.0, self.delay_s + self.random.uniform(-self.jitter_s, self.jitter_s))
        self.count += 1
        heapq.heappush(self.held, (time.monotonic() + hold, self.count, packet))
        self.total_s += hold
        self.longest_s = max(self.longest_s, hold)

    def release(self, *, everything: bool = False) -> float:
        """Let go the packets whose time has come (all of them); seconds to the next one."""
        now = time.monotonic()
        while self.held and (everything or self.held[0][0] <= now):
            heapq.heappop(self.held)[2].accept()
        return self.held[0][0] - now if self.held else POLL_S

    def tally(self) -> Tally:
        mean = self.total_s / self.count if self.count else 0.0
        return Tally(self.count, round(mean * 1000, 1), round(self.longest_s * 1000, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eoslab.runtime.linkdelay")
    parser.add_argument("--first-queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--lifetime-s", type=float, required=True)
    args = parser.parse_args(argv)
    from netfilterqueue import COPY_META, NetfilterQueue

    holder = _Holder(args.delay_ms, args.jitter_ms, args.seed)
    queue = NetfilterQueue()
    bound = None
    for number in range(args.first_queue, args.first_queue + QUEUES_TRIED):
        try:
            queue.bind(number, holder.receive, max_len=MAX_QUEUED, mode=COPY_META)
        except OSError:
            continue
        bound = number
        break
    if bound is None:
        print(f"no free netfilter queue from {args.first_queue}", file=sys.stderr)
        return 1
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    parent = os.getppid()
    deadline = time.monotonic() + args.lifetime_s
    fd = socket.fromfd(queue.get_fd(), socket.AF_NETLINK, socket.SOCK_RAW)
    print(f"ready queue={bound}", flush=True)
    try:
        while not stopping and os.getppid() == parent and time.monotonic() < deadline:
            wait = min(holder.release(), POLL_S)
            with_packets, _, _ = select.select([fd], [], [], max(wait, 0.0))
            if with_packets:
                queue.run(block=False)
    finally:
        holder.release(everything=True)
        queue.unbind()
        print(json.dumps(holder.tally().__dict__), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
