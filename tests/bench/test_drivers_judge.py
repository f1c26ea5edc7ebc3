"""The drivers' throughput figures against librdkafka's: the target and its two floors, each a
median over runs paired with librdkafka's."""

from __future__ import annotations

import pytest

from eoslab.bench.drivers import Pair, firsts, judge


def pairs(*runs: tuple[int, float, int, float]) -> list[Pair]:
    """(librdkafka's rate, its CPU a record, the driver's rate, its CPU a record) per pair."""
    return [
        (
            {"records_per_s": base, "cpu_us_per_record": base_cpu},
            {"records_per_s": driver, "cpu_us_per_record": driver_cpu},
        )
        for base, base_cpu, driver, driver_cpu in runs
    ]


@pytest.mark.parametrize(
    ("runs", "alone", "expected"),
    [
        # half librdkafka's rate, under twice its CPU a record, a fast client: met
        (
            pairs((300_000, 6.0, 150_000, 11.0)),
            600_000,
            {
                "vs_librdkafka": 0.5,
                "met": True,
                "cpu_floor_ratio": 0.545,
                "floor_below_target": False,
            },
        ),
        # a record costing more than twice librdkafka's CPU: a floor below the target
        (
            pairs((300_000, 6.0, 120_000, 13.0)),
            400_000,
            {
                "vs_librdkafka": 0.4,
                "met": False,
                "cpu_floor_ratio": 0.462,
                "floor_below_target": True,
            },
        ),
        # a client slower by itself than the target: a floor below it too
        (
            pairs((300_000, 6.0, 100_000, 7.0)),
            120_000,
            {
                "vs_librdkafka": 0.333,
                "met": False,
                "cpu_floor_ratio": 0.857,
                "floor_below_target": True,
            },
        ),
        # librdkafka twice as fast in one pair as in the others: the median pair decides, not
        # the rates' medians apart (150,000 / 300,000 would be met)
        (
            pairs(
                (200_000, 6.0, 90_000, 12.0),
                (300_000, 6.0, 150_000, 12.0),
                (400_000, 6.0, 190_000, 12.0),
            ),
            600_000,
            {
                "vs_librdkafka": 0.475,
                "pairs_vs_librdkafka": [0.45, 0.5, 0.475],
                "librdkafka_beside_records_per_s": 300_000,
                "median_rates_vs_librdkafka": 0.5,
                "met": False,
                "cpu_floor_ratio": 0.5,
                "floor_below_target": False,
            },
        ),
    ],
)
def test_a_drivers_rate_is_judged_against_the_target_and_its_floors(
    runs: list[Pair], alone: int, expected: dict[str, object]
) -> None:
    figures = judge(runs, {"records_per_s": alone})
    assert {name: figures[name] for name in expected} == expected
    baseline = sorted(base["records_per_s"] for base, _ in runs)[len(runs) // 2]
    assert figures["client_alone"] == {
        "records_per_s": alone,
        "vs_librdkafka": round(alone / baseline, 3),
    }


def test_who_runs_first_in_a_pair_takes_turns() -> None:
    assert firsts(6) == ["librdkafka", "driver", "driver", "librdkafka", "librdkafka", "driver"]
