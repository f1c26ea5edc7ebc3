"""The naive checker's transaction anomalies (pure Python) on planted histories: each anomaly
found at its exact place, and nothing on the clean history (the negative control)."""

from __future__ import annotations

import pytest
from txn_planted import ALSO, clean, planted

from eoslab.rundir import TRANSACTION_ANOMALIES
from eoslab.verify.producer.history import EXCUSED_OUTCOMES
from eoslab.verify.producer.naive import excuse_aborted
from eoslab.verify.transactions.naive import aborted_records, count_txn_anomalies, txn_anomalies


def test_the_clean_history_has_no_transaction_anomaly() -> None:
    history = clean()
    assert count_txn_anomalies(history.transactions, history.reads) == dict.fromkeys(
        TRANSACTION_ANOMALIES, 0
    )


@pytest.mark.parametrize("name", TRANSACTION_ANOMALIES)
def test_a_planted_anomaly_is_found_where_it_is(name: str) -> None:
    history, where = planted(name)
    found = txn_anomalies(history.transactions, history.reads)
    assert found[name] == where
    others = {n: len(rows) for n, rows in found.items() if n != name}
    assert others == {n: ALSO.get(name, {}).get(n, 0) for n in others}


def test_unacknowledged_records_of_aborted_transactions_are_excused() -> None:
    """A record of an aborted transaction that never made it to the log is no gap: its outcome
    becomes ``aborted``; acknowledged ones and those of other transactions keep theirs."""
    history = [
        ("s0", 0, 0, "k0", 0, "ack"),
        ("s0", 0, 2, "k0", 2, "indeterminate"),
        ("s0", 1, 1, "k1", 1, "ack"),
        ("s0", 1, 3, "k1", 3, "indeterminate"),
    ]
    transactions = clean().transactions  # txn 1, aborted: (0, 2) and (1, 1)
    excused = list(excuse_aborted(history, aborted_records(transactions)))
    assert [row[5] for row in excused] == ["ack", "aborted", "ack", "indeterminate"]
    assert "aborted" in EXCUSED_OUTCOMES
