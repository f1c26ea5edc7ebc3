"""What every kill-cycle soak shares: the witness producer and the committing group running
beside the kills, and the pacing of the kills — each waits for new acknowledgements of records
and of a commit (progress between two kills), then a seeded random pause (the kill lands at
varying points of a produce); no kill after the time bound."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from eoslab.clock import wait_until
from eoslab.soak.committer import Committer
from eoslab.soak.witness import WitnessProducer

PROGRESS_TIMEOUT_S = 90.0


@dataclass
class KillPacing:
    bootstrap: str
    witness_rate: float
    acks_per_cycle: int
    max_seconds: float
    max_extra_s: float
    seed: int
    stalls: int = 0
    """Cycles whose acknowledgements (records and a commit) did not come within
    PROGRESS_TIMEOUT_S."""
    seconds: float = 0.0
    """From the first kill's pacing to the stop of the witness and the group."""
    _begin: float = field(init=False, default=0.0)
    witness: WitnessProducer = field(init=False)
    committer: Committer = field(init=False)

    def __post_init__(self) -> None:
        self.witness = WitnessProducer(self.bootstrap, self.witness_rate)
        self.committer = Committer(self.bootstrap)

    def _progress(self) -> bool:
        """New acknowledgements, and a new acknowledged commit of the group (on a loaded
        machine its join may take longer than the witness's acks: a kill before the group's
        first commit would test no committed offset across the restart)."""
        target = self.witness.acknowledged() + self.acks_per_cycle
        commits = self.committer.acknowledged_commits() + 1
        return bool(
            wait_until(
                lambda: (
                    self.witness.acknowledged() >= target
                    and self.committer.acknowledged_commits() >= commits
                ),
                PROGRESS_TIMEOUT_S,
                interval_s=0.05,
            )
        )

    def kills(self, cycles: int) -> Iterator[int]:
        """Yields when the next kill is due (at most ``cycles`` times, none after
        ``max_seconds``); the witness and the group run from the first until the loop ends, and
        once it ends normally they are stopped after one more round of acknowledgements."""
        rng = random.Random(self.seed)
        self._begin = time.monotonic()
        self.witness.start()
        self.committer.start()
        try:
            for cycle in range(cycles):
                if time.monotonic() - self._begin > self.max_seconds:
                    break
                self.stalls += not self._progress()
                time.sleep(rng.uniform(0, self.max_extra_s))
                yield cycle
            self._progress()
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop the witness and the group (again: a loop left by ``break`` must not rely on its
        generator being closed before the read-back)."""
        if self.seconds:
            return
        self.witness.stop()
        self.committer.stop()
        self.seconds = time.monotonic() - self._begin
