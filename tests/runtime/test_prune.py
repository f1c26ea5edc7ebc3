"""`eoslab lab prune`: which runs are old, and on the real lab, that a checked run's topic is
deleted (it re-checks from its copy), a never-checked run's kept unless forced, and run
directories deleted only with their topics."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eoslab.admin import create_topic, delete_topic, topic_exists
from eoslab.rundir import RunDir, RunInfo
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.prune import TopicFate, old_runs, parse_duration_ms, prune
from eoslab.verify.checker import verify_run
from eoslab.workload.synthetic import generate

DAY_MS = 86_400_000


def info(run_id: str, started_ms: int) -> RunInfo:
    return RunInfo(
        run_id=run_id,
        scenario="baseline",
        target="kafka",
        bootstrap="127.0.0.1:9091",
        topic=f"eos-{run_id}",
        partitions=1,
        seed=0,
        started_ms=started_ms,
    )


def names(chosen: list[tuple[RunDir, RunInfo]]) -> list[str]:
    return [found.run_id for _, found in chosen]


def test_old_runs_by_age_and_by_count() -> None:
    now = 30 * DAY_MS
    runs = [
        (RunDir(Path(name)), info(name, now - age * DAY_MS))
        for name, age in (("a", 20), ("b", 10), ("c", 1))
    ]
    assert names(old_runs(runs, now_ms=now, older_than_ms=7 * DAY_MS, keep_last=None)) == ["a", "b"]
    assert names(old_runs(runs, now_ms=now, older_than_ms=None, keep_last=1)) == ["a", "b"]
    assert names(old_runs(runs, now_ms=now, older_than_ms=15 * DAY_MS, keep_last=1)) == ["a"]
    assert names(old_runs(runs, now_ms=now, older_than_ms=None, keep_last=5)) == []
    with pytest.raises(ValueError, match="--older-than and/or --keep-last"):
        old_runs(runs, now_ms=now, older_than_ms=None, keep_last=None)
    assert parse_duration_ms("7d") == 7 * DAY_MS
    assert parse_duration_ms("30m") == 1_800_000
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_ms("7 days")


@pytest.mark.lab
def test_prune_deletes_the_topics_of_checked_runs_and_keeps_the_rest(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path
) -> None:
    bootstrap = lab.config.bootstrap_servers
    checked, unchecked = (generate(bootstrap, tmp_path, 30, name=n)[0] for n in ("old", "new"))
    for run in (checked, unchecked):  # generated for an external cluster: made the lab's
        run.write_info(run.read_info().model_copy(update={"target": "kafka"}))
    verify_run(checked.path, spark=spark)
    runs = [(run, run.read_info()) for run in (checked, unchecked)]

    dry = prune(lab.config, runs, delete_run_dirs=True, dry_run=True)
    assert [p.fate for p in dry] == [TopicFate.DELETED, TopicFate.KEPT_UNCHECKED]
    assert topic_exists(bootstrap, runs[0][1].topic)
    assert checked.path.is_dir()

    done = prune(lab.config, runs, delete_run_dirs=True)
    assert [(p.fate, p.run_dir_deleted) for p in done] == [
        (TopicFate.DELETED, True),
        (TopicFate.KEPT_UNCHECKED, False),
    ]
    assert not topic_exists(bootstrap, runs[0][1].topic)
    assert not checked.path.exists()
    assert topic_exists(bootstrap, runs[1][1].topic)

    forced = prune(lab.config, runs[1:], force=True)
    assert [p.fate for p in forced] == [TopicFate.DELETED]
    assert not topic_exists(bootstrap, runs[1][1].topic)
    assert [p.fate for p in prune(lab.config, runs[1:], force=True)] == [TopicFate.GONE]
    assert unchecked.path.is_dir()  # without delete_run_dirs


@pytest.mark.lab
def test_an_external_runs_topic_is_deleted_only_when_asked_and_no_other_topic_there(
    lab: LocalRuntime, tmp_path: Path
) -> None:
    """The lab's Kafka plays the user's cluster: a run's own topic goes with --external (at the
    bootstrap the run was given); a run.json edited to name one of the user's topics keeps it,
    forced or not."""
    bootstrap = lab.config.bootstrap_servers
    ours, theirs = (generate(bootstrap, tmp_path, 10, name=n)[0] for n in ("ours", "theirs"))
    users_topic = f"orders-{theirs.path.name[-6:]}"
    create_topic(bootstrap, users_topic, partitions=1, replication=1)
    theirs.write_info(theirs.read_info().model_copy(update={"topic": users_topic}))
    runs = [(run, run.read_info()) for run in (ours, theirs)]

    kept = prune(lab.config, runs, force=True)
    assert [p.fate for p in kept] == [TopicFate.KEPT_EXTERNAL, TopicFate.KEPT_NOT_OURS]
    assert topic_exists(bootstrap, runs[0][1].topic)

    done = prune(lab.config, runs, force=True, external=True)
    assert [p.fate for p in done] == [TopicFate.DELETED, TopicFate.KEPT_NOT_OURS]
    assert not topic_exists(bootstrap, runs[0][1].topic)
    assert topic_exists(bootstrap, users_topic)
    assert delete_topic(bootstrap, users_topic)
