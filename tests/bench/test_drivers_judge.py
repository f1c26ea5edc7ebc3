"""The drivers' throughput figures against librdkafka's: the target and its two floors."""

from __future__ import annotations

from eoslab.bench.drivers import judge

BASELINE = {"records_per_s": 300_000, "cpu_us_per_record": 6.0}


def test_a_driver_at_half_librdkafkas_rate_meets_the_target() -> None:
    figures = judge(
        {"records_per_s": 150_000, "cpu_us_per_record": 11.0},
        BASELINE,
        {"records_per_s": 600_000},
    )
    assert (figures["vs_librdkafka"], figures["met"]) == (0.5, True)
    assert figures["cpu_floor_ratio"] == 0.545
    assert figures["floor_below_target"] is False


def test_a_record_costing_more_than_twice_librdkafkas_cpu_is_a_floor_below_the_target() -> None:
    figures = judge(
        {"records_per_s": 120_000, "cpu_us_per_record": 13.0},
        BASELINE,
        {"records_per_s": 400_000},
    )
    assert (figures["vs_librdkafka"], figures["met"]) == (0.4, False)
    assert figures["cpu_floor_ratio"] == 0.462
    assert figures["client_alone"] == {"records_per_s": 400_000, "vs_librdkafka": 1.333}
    assert figures["floor_below_target"] is True


def test_a_client_slower_alone_than_the_target_is_a_floor_below_it() -> None:
    figures = judge(
        {"records_per_s": 100_000, "cpu_us_per_record": 7.0},
        BASELINE,
        {"records_per_s": 120_000},
    )
    assert figures["met"] is False
    assert figures["floor_below_target"] is True
