"""A lane's run keeps its topics in its run directory before the lane goes on, so its check
never reads a target that the lane's next run is faulting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eoslab.admin import delete_topic
from eoslab.orchestration import steps
from eoslab.rundir import RunDir
from eoslab.runtime.local import LocalRuntime
from eoslab.verify.topic_reader import KeptTopic, TopicGoneError

pytestmark = pytest.mark.lab

RECORDS = 300


def _run(lab: LocalRuntime, runs: Path, keep_on: str | None) -> RunDir:
    run_dir = steps.run_scenario(
        "baseline", "refbroker", records=RECORDS, runs_dir=str(runs), keep_on=keep_on
    )
    return RunDir(Path(run_dir))


def test_a_run_keeps_its_topic_before_the_lane_goes_on_and_is_checked_from_it(
    lab: LocalRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept on the warm Spark as the run ends: its topic then deleted from the target (as a
    later run's fault makes it unreadable), the check still reads every record and conforms.
    Not kept (a run outside a lane): the same check finds the topic gone."""
    monkeypatch.setattr(steps, "lab_config", lambda: lab.config)
    remote = lab.config.spark_remote
    kept = _run(lab, tmp_path / "kept", keep_on=remote)
    info = kept.read_info()
    assert KeptTopic.log(kept, info).is_kept
    assert delete_topic(info.bootstrap, info.topic)
    assert steps.check_run(str(kept.path), remote=remote)["conforms"] is True
    metrics = json.loads(kept.metrics_json.read_text())  # read from the copy: every record
    assert metrics["records"] == metrics["sends"] == RECORDS

    unkept = _run(lab, tmp_path / "unkept", keep_on=None)
    unkept_info = unkept.read_info()
    assert not KeptTopic.log(unkept, unkept_info).is_kept
    assert delete_topic(unkept_info.bootstrap, unkept_info.topic)
    with pytest.raises(TopicGoneError, match="holds no copy of it"):
        steps.check_run(str(unkept.path), remote=remote)
