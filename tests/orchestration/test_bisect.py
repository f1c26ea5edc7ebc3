"""eoslab bisect's search (pure logic, a judge that knows the fix) and client ranges."""

from __future__ import annotations

import pytest

from eoslab.clients import ClientError, ClientRef
from eoslab.orchestration.bisect import Side, Step, newest_patches, search
from eoslab.workload.drivers.releases import parse_range, version_key, within

MAVEN = [
    "2.6.0", "2.6.1", "2.6.2", "2.6.3", "2.7.0", "2.7.1", "2.7.2", "2.8.0", "2.8.1", "2.8.2",
    "3.0.0", "3.0.1", "3.0.2", "3.1.0", "3.1.1", "3.1.2", "3.2.0", "3.2.3", "3.3.0", "3.3.1",
    "3.3.2", "3.4.0", "3.4.1",
]  # fmt: skip


def fixed_from(version: str, ran: list[str]) -> object:
    def judge(release: ClientRef) -> Step:
        ran.append(release.version)
        fixed = version_key(release.version) >= version_key(version)
        return Step(release, Side.FIXED if fixed else Side.BROKEN, "judged")

    return judge


@pytest.mark.parametrize("fix", ["2.7.1", "3.3.2", "2.6.1", "3.4.1"])
def test_the_first_fixed_release_is_found_with_the_newest_patches_first(fix: str) -> None:
    releases = within("java:2.6.0..3.4.1", MAVEN)
    ran: list[str] = []
    result = search(releases, fixed_from(fix, ran), max_steps=12)  # type: ignore[arg-type]
    assert result.found, result.conclusion
    assert result.first_fixed == ClientRef("java", fix)
    assert result.last_broken == releases[releases.index(ClientRef("java", fix)) - 1]
    assert ran[:2] == ["2.6.0", "3.4.1"]  # the range's ends first
    newest = {releases[i].version for i in newest_patches(releases)}
    phase_one = [v for v in ran[2:] if v in newest]
    assert ran[2 : 2 + len(phase_one)] == phase_one  # then only newest patches, bisected
    assert len(ran) <= 2 + 4 + 2  # ends, minors (log2 of 8), patches (log2 of 4)
    assert [s.release.version for s in result.steps] == sorted(ran, key=version_key)


def test_a_range_whose_first_release_already_conforms_has_no_fix_in_it() -> None:
    releases = within("java:3.3.2..3.4.1", MAVEN)
    result = search(releases, fixed_from("2.7.1", []), max_steps=8)  # type: ignore[arg-type]
    assert not result.found
    assert result.conclusion == "the range's first release java:3.3.2 conforms: no fix in it"


def test_the_step_bound_and_a_cell_without_a_verdict_stop_the_bisection() -> None:
    releases = within("java:2.6.0..3.4.1", MAVEN)
    bounded = search(releases, fixed_from("3.3.2", []), max_steps=3)  # type: ignore[arg-type]
    assert not bounded.found
    assert bounded.conclusion == "stopped after 3 cells (--max-steps)"
    assert bounded.last_broken is not None  # narrowed
    assert bounded.first_fixed is not None

    def invalid_at_3_0(release: ClientRef) -> Step:
        if release.version.startswith("3.0"):
            return Step(release, Side.UNKNOWN, "invalid: a fault did not take effect")
        return Step(release, Side.BROKEN if release.version < "3.3.2" else Side.FIXED, "judged")

    stopped = search(releases, invalid_at_3_0, max_steps=12)
    assert not stopped.found
    assert "has no verdict: the bisection stops there" in stopped.conclusion


def test_verdicts_an_earlier_bisection_left_cost_no_step() -> None:
    releases = within("java:2.6.0..3.4.1", MAVEN)

    def left_before(release: ClientRef) -> Step:
        fixed = version_key(release.version) >= version_key("2.8.1")
        side = Side.FIXED if fixed else Side.BROKEN
        return Step(release, side, "judged", reused=True)

    def never(release: ClientRef) -> Step:
        raise AssertionError(f"{release} run again")

    result = search(releases, never, max_steps=0, known=left_before)
    assert result.found
    assert result.first_fixed == ClientRef("java", "2.8.1")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("java:2.7.0", "give FAMILY:LOW..HIGH"),
        ("java:3.0.0..2.7.0", "3.0.0 is not before 2.7.0"),
        ("java:2.7.0..3.9.9", "3.9.9 not in the registry"),
        ("cobol:1..2", "unknown client library 'cobol'"),
    ],
)
def test_a_bad_range_is_one_line(text: str, problem: str) -> None:
    with pytest.raises(ClientError, match=problem):
        within(text, MAVEN)
    assert parse_range("franz-go:v1.20.6..v1.20.7")[1] == ClientRef("franz-go", "v1.20.7")
