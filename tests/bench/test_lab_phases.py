"""The bench's phases of a one-command run: each phase's CPU from the sampler, its floor, and
the cuts at the runs' windows."""

from __future__ import annotations

import time

import pytest

from eoslab.bench.lab_phases import CpuSampler, busy_cpu_s, phase, phases


def sampled(samples: list[tuple[float, float]]) -> CpuSampler:
    sampler = CpuSampler()
    sampler.samples = samples
    return sampler


def test_the_sampler_reads_the_machines_busy_time_while_the_block_runs() -> None:
    before = busy_cpu_s()
    with CpuSampler(interval_s=0.05) as sampler:
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # this process alone keeps one core busy
            pass
    assert len(sampler.samples) >= 5
    begin, end = sampler.samples[0][0], sampler.samples[-1][0]
    assert 0.4 <= sampler.busy_between(begin, end) <= busy_cpu_s() - before


def test_busy_time_is_interpolated_between_samples_and_held_outside_them() -> None:
    sampler = sampled([(100.0, 10.0), (102.0, 14.0), (104.0, 14.0)])
    assert sampler.busy_between(100.0, 101.0) == pytest.approx(2.0)
    assert sampler.busy_between(101.0, 103.0) == pytest.approx(2.0)
    assert sampler.busy_between(90.0, 110.0) == pytest.approx(4.0)


def test_a_phase_is_cpu_bound_when_its_floor_is_near_its_wall_time() -> None:
    sampler = sampled([(0.0, 0.0), (10.0, 19.0), (20.0, 21.0)])
    busy = phase("busy", 0.0, 10.0, sampler, cores=2)
    idle = phase("idle", 10.0, 20.0, sampler, cores=2)
    assert busy == {
        "phase": "busy",
        "seconds": 10.0,
        "busy_cpu_s": 19.0,
        "floor_s": 9.5,
        "cpu_bound": True,
    }
    assert idle["floor_s"] == 1.0
    assert idle["cpu_bound"] is False


def test_the_run_is_cut_at_the_first_start_the_last_end_and_the_last_verdict() -> None:
    sampler = sampled([(0.0, 0.0), (100.0, 100.0)])
    windows = [(10.0, 40.0, 50.0), (20.0, 60.0, 75.0)]
    cut = phases(windows, 0.0, 90.0, sampler, cores=2)
    assert cut["runs_s_summed"] == 70.0
    assert [(p["seconds"], p["floor_s"]) for p in cut["phases"]] == [
        (10.0, 5.0),
        (50.0, 25.0),
        (15.0, 7.5),
        (15.0, 7.5),
    ]
    assert cut["whole"] == phase("whole run", 0.0, 90.0, sampler, cores=2)
    assert phases([], 0.0, 90.0, sampler, cores=2)["phases"] == []
