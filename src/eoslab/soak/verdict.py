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


def malformed_problems(figures: dict[str, Any]) -> list[str]:
    found = []
    if figures["crashes"]:
        found.append("malformed: the broker crashed")
    if figures["failures"]:
        found.append(f"malformed: {figures['failures']} frames hung or got a wrong answer")
    if figures["broker_unresponsive"] or figures["liveness"]["failures"]:
        found.append("malformed: the broker stopped answering fresh connections")
    if figures["internal_errors"]:
        found.append(f"malformed: {figures['internal_errors']} internal errors in the broker log")
    if sum(figures["outcomes"].values()) != figures["frames"]:
        found.append("malformed: frames left unclassified")
    growth = figures["memory"].get("growth_ratio")
    if growth is not None and growth > MAX_RSS_GROWTH:
        found.append(f"malformed: broker RSS grew x{growth}")
    return found + _ledger_problems("malformed", figures["ledger"])


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
    if figures["cycles_without_progress"]:
        found.append(f"crash: {figures['cycles_without_progress']} cycles without an ack")
    return found + _ledger_problems("crash", figures["ledger"])


def problems(results: dict[str, Any]) -> list[str]:
    """Every broken promise in a soak's results (empty: the soak passed)."""
    found = []
    if "malformed" in results:
        found += malformed_problems(results["malformed"])
    if "crash_cycles" in results:
        found += crash_problems(results["crash_cycles"])
    return found
