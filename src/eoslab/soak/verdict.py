"""What a soak must show: the figures that must be zero, and the bounds."""

from __future__ import annotations

from typing import Any

from eoslab.soak.committer import went_back

MAX_RSS_GROWTH = 2.0
"""The broker's RSS in the last quarter of the run at most this many times the first's."""


def _witness_problems(where: str, witness: dict[str, Any], *, misplaced: bool = True) -> list[str]:
    """``misplaced``: whether a record found at another offset than its acknowledgement said is
    a problem (it is of the lab's own servers; of Kafka it is a finding the figures report)."""
    found = []
    if witness["lost"]:
        found.append(f"{where}: {witness['lost']} acknowledged records lost")
    if misplaced and witness["misplaced"]:
        found.append(
            f"{where}: {witness['misplaced']} records found at another offset than acknowledged"
        )
    if witness["duplicates_within_session"]:
        found.append(f"{where}: {witness['duplicates_within_session']} duplicates in a session")
    if not witness["acknowledged"]:
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
    found += _group_problems(where, figures["consumer_group"])
    return found + _witness_problems(where, figures["witness"])


def _group_problems(where: str, group: dict[str, Any]) -> list[str]:
    """The committing consumer group beside the soak: it commits, and never goes back."""
    found = []
    if group["acknowledged_commits_lower_than_an_earlier_one"]:
        found.append(f"{where}: an acknowledged commit went below an earlier one")
    if went_back(group["highest_commit"], group["committed_offset_at_end"]):
        found.append(f"{where}: the group's committed offset ended behind an acknowledged commit")
    if not group["acknowledged_commits"]:
        found.append(f"{where}: the consumer group committed nothing")
    return found


def _transaction_problems(txn: dict[str, Any]) -> list[str]:
    """The transactional producer across the kills: the transaction state reloaded intact."""
    found = []
    named = {
        "lost_committed": "records of committed transactions not read",
        "aborted_read": "records of aborted transactions read committed",
        "duplicates": "records read twice",
        "torn": "transactions read in part",
    }
    for name, what in named.items():
        if txn[name]:
            found.append(f"crash: {txn[name]} {what}")
    if not txn["transactions"]["committed"]:
        found.append("crash: the transactional producer committed nothing")
    if not txn["aborted_records_in_log"]:
        found.append("crash: no aborted transaction's records in the log (none to wrongly read)")
    if txn["last_stable_offset"] != txn["high_watermark"]:
        found.append("crash: a transaction was left open (last stable offset below the end)")
    return found


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
    if behind:
        found.append(f"crash: committed offsets went backwards ({behind} restarts)")
    if unanswered := group["restarts_whose_committed_offset_went_unanswered"]:
        found.append(f"crash: {unanswered} restarts did not answer the committed offset")
    found += _group_problems("crash", group)
    found += _transaction_problems(figures["transactions"])
    if figures["cycles_without_progress"]:
        found.append(
            f"crash: {figures['cycles_without_progress']} cycles without new acks and a commit"
        )
    return found + _witness_problems("crash", figures["witness"])


def load_problems(figures: dict[str, Any]) -> list[str]:
    found = []
    wanted = figures["parameters"]["mebibytes"]
    for name, stream in figures["streams"].items():
        if stream["lost"] or stream["failed"] or stream["undelivered"]:
            found.append(
                f"load {name}: {stream['lost']} lost, {stream['failed']} failed, "
                f"{stream['undelivered']} undelivered"
            )
        if stream["mebibytes"] < wanted:
            found.append(f"load {name}: only {stream['mebibytes']} of {wanted} MiB in time")
    for name, server in figures["servers"].items():
        found += _server_problems("load", name, server)
    return found


MAX_SECOND_WAVE_RSS_GROWTH = 1.25
"""The broker's RSS holding the second wave of producer ids at most this many times the first's
(the expired state's memory is reused)."""


def producer_id_problems(figures: dict[str, Any]) -> list[str]:
    found = []
    for n, wave in enumerate(figures["waves"], start=1):
        if wave["held_after_wave"] != wave["producers"]:
            found.append(
                f"producer ids wave {n}: {wave['held_after_wave']} of {wave['producers']} held"
            )
        if wave["left_after_expiry"]:
            found.append(f"producer ids wave {n}: {wave['left_after_expiry']} never expired")
    if figures["rss_growth_second_wave"] > MAX_SECOND_WAVE_RSS_GROWTH:
        found.append(f"producer ids: RSS grew x{figures['rss_growth_second_wave']} in wave 2")
    for name, server in figures["servers"].items():
        found += _server_problems("producer ids", name, server)
    return found + _witness_problems("producer ids", figures["witness"])


def kafka_cycle_problems(target: str, figures: dict[str, Any]) -> list[str]:
    where = f"{target} leader kills"
    found = []
    if figures["failed_recoveries"]:
        found.append(f"{where}: the cluster did not recover: {figures['failed_recoveries']}")
    if not figures["cycles"]:
        found.append(f"{where}: not one cycle")
    if figures["leadership_moved"] < figures["cycles"]:
        found.append(f"{where}: leadership did not move after every kill")
    if figures["cycles_without_progress"]:
        found.append(
            f"{where}: {figures['cycles_without_progress']} cycles without new acks and a commit"
        )
    found += _group_problems(where, figures["consumer_group"])
    return found + _witness_problems(where, figures["witness"], misplaced=False)


def problems(results: dict[str, Any]) -> list[str]:
    """Every broken promise in a soak's results (empty: the soak passed)."""
    found = []
    for phase in ("malformed", "malformed_via_proxy"):
        if phase in results:
            found += malformed_problems(phase, results[phase])
    if "crash_cycles" in results:
        found += crash_problems(results["crash_cycles"])
    if "load" in results:
        found += load_problems(results["load"])
    if "producer_ids" in results:
        found += producer_id_problems(results["producer_ids"])
    kafka = results.get("kafka_cycles", {})
    for target in kafka.get("parameters", {}).get("targets", []):
        found += kafka_cycle_problems(target, kafka[target])
    return found
