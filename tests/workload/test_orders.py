"""The order state machine: which command each record carries, seeded and replayable."""

from __future__ import annotations

import zlib

from eoslab.workload.sink.orders import MAX_MODIFICATIONS, Command, command_of, lifecycle


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
