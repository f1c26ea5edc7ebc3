"""The order state machine: which command each record carries, seeded and replayable."""

from __future__ import annotations

import zlib

from pyspark.sql import SparkSession

from eoslab.workload.consumer.sink.orders import (
    COMMAND_SQL,
    MAX_MODIFICATIONS,
    Command,
    command_of,
    lifecycle,
)


def test_every_key_runs_whole_order_lifecycles() -> None:
    for key in (f"k{i}" for i in range(50)):
        cycle = lifecycle(7, key)
        assert 3 <= cycle <= 2 + MAX_MODIFICATIONS
        commands = [command_of(7, key, seq) for seq in range(3 * cycle)]
        for start in range(0, 3 * cycle, cycle):
            assert commands[start : start + cycle] == [
                Command.CREATE,
                *[Command.MODIFY] * (cycle - 2),
                Command.CANCEL,
            ]


def test_the_lifecycle_is_seeded_by_the_crc32_spark_computes_too() -> None:
    assert lifecycle(7, "k3") == 3 + zlib.crc32(b"7:k3") % 4
    assert {lifecycle(seed, "k3") for seed in range(40)} == {3, 4, 5, 6}
    assert [lifecycle(7, f"k{i}") for i in range(20)] == [lifecycle(7, f"k{i}") for i in range(20)]


def test_spark_derives_the_same_commands(spark: SparkSession) -> None:
    """The consumer checker reads commands off the topic with COMMAND_SQL."""
    rows = [(f"k{i}", seq) for i in range(40) for seq in range(14)]
    frame = spark.createDataFrame(rows, "key string, key_seq long")
    command = COMMAND_SQL.format(seed=7, key="key", key_seq="key_seq")
    derived = frame.selectExpr("key", "key_seq", f"{command} AS command").collect()
    assert {(r.key, r.key_seq): r.command for r in derived} == {
        (key, seq): command_of(7, key, seq).value for key, seq in rows
    }
