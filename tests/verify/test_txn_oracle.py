"""The naive checker's transaction anomalies (pure Python) on planted histories: each anomaly
found at its exact place, and nothing on the clean history (the negative control)."""

from __future__ import annotations

import pytest
from txn_planted import ALSO, clean, planted

from eoslab.rundir import TRANSACTION_ANOMALIES
from eoslab.verify.naive_txn import count_txn_anomalies, txn_anomalies


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
