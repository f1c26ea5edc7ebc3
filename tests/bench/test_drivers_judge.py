"""The drivers' throughput figures against librdkafka's: the target and its two floors."""

from __future__ import annotations

import pytest

from eoslab.bench.drivers import judge

BASELINE = {"records_per_s": 300_000, "cpu_us_per_record": 6.0}


@pytest.mark.parametrize(
    ("driver", "alone", "expected"),
    [
        # half librdkafka's rate, under twice its CPU a record, a fast client: met
        (
            {"records_per_s": 150_000, "cpu_us_per_record": 11.0},
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
            {"records_per_s": 120_000, "cpu_us_per_record": 13.0},
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
            {"records_per_s": 100_000, "cpu_us_per_record": 7.0},
            120_000,
            {
                "vs_librdkafka": 0.333,
                "met": False,
                "cpu_floor_ratio": 0.857,
                "floor_below_target": True,
            },
        ),
    ],
)
def test_a_drivers_rate_is_judged_against_the_target_and_its_floors(
    driver: dict[str, float], alone: int, expected: dict[str, object]
) -> None:
    figures = judge(driver, BASELINE, {"records_per_s": alone})
    assert {name: figures[name] for name in expected} == expected
    assert figures["client_alone"] == {
        "records_per_s": alone,
        "vs_librdkafka": round(alone / BASELINE["records_per_s"], 3),
    }
