"""What a soak must show: the figures that must be zero, and the bounds."""

from __future__ import annotations

from typing import Any

MAX_RSS_GROWTH = 2.0
"""The broker's RSS in the last quarter of the run at most this many times the first's."""


def _ledger_problems(where: str, ledger: dict[str, Any]) -> list[str]:
    found = []
    if ledger["lost"]:
        found.append(f"{where}: {ledger['lost']} acknowledged records lost")
    if ledger["duplicates_within_session"]:
        found.append(f"{where}: {ledger['duplicates_within_session']} duplicates in a session")
    if not ledger["acknowledged"]:
        found.append(f"{where}: the producer got no acknowledgement at all")
    return found


def _server_problems(where: str, name: str, figures: dict[str, Any]) -> list[str]:
    found = []
    if figures["crashes"]:
        found.append(f"{where}: the {name} crashed")
    if figures["liveness"]["failures"]:
        found.append(f"{where}: the {name} stopped answering fresh connections")
    growth = figures["memory"].get("growth_ratio")
    if growth is not None and growth > MAX_RSS_GROWTH:
        found.append(f"{where}: the {name}'s RSS grew x{growth}")
    return found


def malformed_problems(where: str, figures: dict[str, Any]) -> list[str]:
    found = []
    for name, server in figures["servers"].items():
        found += _server_problems(where, name, server)
    if figures["failures"]:
        found.append(f"{where}: {figures['failures']} frames hung or got a wrong answer")
    if figures["unresponsive_during_silence"]:
        found.append(f"{where}: nobody was answered during a silence")
    if figures["internal_errors"]:
        found.append(f"{where}: {figures['internal_errors']} internal errors in the broker log")
    if sum(figures["outcomes"].values()) != figures["frames"]:
        found.append(f"{where}: frames left unclassified")
    return found + _ledger_problems(where, figures["ledger"])


def crash_problems(figures: dict[str, Any]) -> list[str]:
    found = []
    if figures["failed_starts"]:
        found.append(f"crash: the broker did not restart: {figures['failed_starts']}")
    if not figures["cycles"]:
        found.append("crash: not one kill cycle")
    if figures["reloads_missing_acked_records"]:
        found.append(
            f"crash: {figures['reloads_missing_acked_records']} restarts reloaded a short log"
        )
    group = figures["consumer_group"]
    behind = group["restarts_with_committed_offset_behind_an_acknowledged_commit"]
    if behind or group["acknowledged_commits_lower_than_an_earlier_one"]:
        found.append(f"crash: committed offsets went backwards ({behind} restarts)")
    if group["committed_offset_at_end"] < group["highest_commit"]:
        found.append("crash: the group's committed offset ended behind an acknowledged commit")
    if not group["acknowledged_commits"]:
        found.append("crash: the consumer group committed nothing")
    if figures["cycles_without_progress"]:
        found.append(f"crash: {figures['cycles_without_progress']} cycles without an ack")
    return found + _ledger_problems("crash", figures["ledger"])


def problems(results: dict[str, Any]) -> list[str]:
    """Every broken promise in a soak's results (empty: the soak passed)."""
    found = []
    for phase in ("malformed", "malformed_via_proxy"):
        if phase in results:
            found += malformed_problems(phase, results[phase])
    if "crash_cycles" in results:
        found += crash_problems(results["crash_cycles"])
    return found
