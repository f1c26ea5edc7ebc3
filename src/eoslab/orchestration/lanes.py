"""Lanes: the targets' scenario runs side by side, each target's one at a time.

The lab's targets are independent clusters, so a run on Kafka 3.9 and a run on Kafka 4 may play
at once; two runs on one target may not (one's nemesis would break the other's records). In
Airflow each target has a lane: a pool of one slot (:func:`eoslab.runtime.airflow.lane_pool`)
that the nightly DAG's runs on that target take, shown in its graph as a task group per target.
A pool only orders the tasks that name it, so the guarantee itself is a lock on the target in
the lab's state folder (:func:`lane_held`), taken by every scenario run a DAG starts, whichever
DAG (``eos_scenario`` beside ``eos_nightly``) and whichever pool: a run that finds its target
busy waits for it, saying whose run it waits for.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

LANES_DIR = "lanes"


@contextmanager
def lane_held(state_dir: Path, targets: Iterable[str], holder: str) -> Iterator[None]:
    """Hold the lanes of ``targets`` (in a fixed order: no two holders wait on each other),
    waiting for each one's current holder to finish. ``holder`` says who holds them to whoever
    waits (a run, a probe)."""
    folder = state_dir / LANES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        for target in sorted(set(targets)):
            descriptor = os.open(folder / f"{target}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            held.callback(os.close, descriptor)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy = os.pread(descriptor, 4096, 0).decode(errors="replace").strip()
                log.info("%s waits for the lane of %s: %s runs on it", holder, target, busy)
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, holder.encode(), 0)
            held.callback(fcntl.flock, descriptor, fcntl.LOCK_UN)
        yield
