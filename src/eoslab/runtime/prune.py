"""`eoslab lab prune`: old runs' topics deleted from the lab's clusters, and the run
directories too when asked, so that the lab does not grow with the nights (every run has a topic
of its own, and brokers load every topic at start-up).

A run is old when it started longer ago than ``older_than`` and/or is not among the newest
``keep_last`` runs. Its topic is deleted only when the run directory keeps a copy of its log
(``topic/``, written by its first check: the run re-checks without its topic); a run never
checked keeps its topic unless ``force``. Runs on an external cluster (a user's own) are
touched there only when asked (``external``), and then only at the bootstrap the run was given.
Whatever the cluster, only the topic the lab named for the run (:func:`run_topic`) is ever
deleted: a run.json edited to name another topic keeps it.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from confluent_kafka import KafkaException

from eoslab.admin import delete_topic
from eoslab.rundir import LAB_TARGETS, RunDir, RunDirError, RunInfo, run_topic
from eoslab.runtime.topology import LabConfig

DURATION = re.compile(r"^(\d+)([smhd])$")
UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """``7d``, ``12h``, ``30m``, ``45s`` in milliseconds; ValueError saying the form."""
    found = DURATION.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a duration: a number and s, m, h or d (e.g. 7d)")
    return int(found.group(1)) * UNIT_MS[found.group(2)]


class TopicFate(StrEnum):
    DELETED = "deleted"
    GONE = "already gone"
    KEPT_UNCHECKED = "kept: never checked (no copy of its log; --force deletes it)"
    KEPT_EXTERNAL = "kept: an external cluster (--external deletes it)"
    KEPT_NOT_OURS = "kept: not the topic the lab named for the run"
    KEPT_TARGET_DOWN = "kept: its target is not in the lab"
    FAILED = "failed"


@dataclass(frozen=True)
class Pruned:
    run_dir: Path
    run_id: str
    target: str
    topic: str
    fate: TopicFate
    detail: str = ""
    run_dir_deleted: bool = False


def find_runs(root: Path) -> list[tuple[RunDir, RunInfo]]:
    """Every run under ``root`` (``runs/<id>`` and ``runs/nightly-*/<id>``), oldest first; run
    directories whose run.json cannot be read are left out (not ours to judge here)."""
    found = []
    for run_json in [*root.glob("*/run.json"), *root.glob("*/*/run.json")]:
        run = RunDir(run_json.parent)
        try:
            found.append((run, run.read_info()))
        except (OSError, RunDirError):
            continue
    return sorted(found, key=lambda pair: pair[1].started_ms)


def old_runs(
    runs: list[tuple[RunDir, RunInfo]],
    *,
    now_ms: int,
    older_than_ms: int | None,
    keep_last: int | None,
) -> list[tuple[RunDir, RunInfo]]:
    """The runs (oldest first) that are old by both criteria given; at least one is needed."""
    if older_than_ms is None and keep_last is None:
        raise ValueError("say which runs are old: --older-than and/or --keep-last")
    if keep_last is not None and keep_last < 0:
        raise ValueError(f"--keep-last {keep_last}: not a count of runs")
    candidates = runs if keep_last is None else runs[: max(len(runs) - keep_last, 0)]
    if older_than_ms is None:
        return list(candidates)
    return [(run, info) for run, info in candidates if info.started_ms < now_ms - older_than_ms]


def prune(
    config: LabConfig,
    runs: Iterable[tuple[RunDir, RunInfo]],
    *,
    delete_run_dirs: bool = False,
    force: bool = False,
    external: bool = False,
    dry_run: bool = False,
) -> list[Pruned]:
    """Delete each run's topic (see the module docstring for which are kept) and, with
    ``delete_run_dirs``, its run directory; ``dry_run`` says what would happen."""
    results = []
    for run, info in runs:
        fate, detail = _topic_fate(
            config, run, info, force=force, external=external, dry_run=dry_run
        )
        run_deleted = False
        if delete_run_dirs and fate in (TopicFate.DELETED, TopicFate.GONE):
            if not dry_run:
                shutil.rmtree(run.path)
            run_deleted = True
        results.append(
            Pruned(run.path, info.run_id, info.target, info.topic, fate, detail, run_deleted)
        )
    return results


def _topic_fate(
    config: LabConfig, run: RunDir, info: RunInfo, *, force: bool, external: bool, dry_run: bool
) -> tuple[TopicFate, str]:
    if info.topic != run_topic(info.run_id):
        return TopicFate.KEPT_NOT_OURS, info.topic
    if info.target in LAB_TARGETS:
        if info.target not in config.targets:
            return TopicFate.KEPT_TARGET_DOWN, ""
        bootstrap = config.bootstrap(info.target)
    elif external:
        bootstrap = info.bootstrap
    else:
        return TopicFate.KEPT_EXTERNAL, ""
    if not run.has_topic_snapshot and not force:
        return TopicFate.KEPT_UNCHECKED, ""
    if dry_run:
        return TopicFate.DELETED, "dry run"
    try:
        deleted = delete_topic(bootstrap, info.topic)
    except KafkaException as error:
        return TopicFate.FAILED, str(error.args[0])
    except TimeoutError as error:
        return TopicFate.FAILED, str(error)
    return (TopicFate.DELETED, "") if deleted else (TopicFate.GONE, "")
