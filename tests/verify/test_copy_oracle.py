"""The naive checker's copy anomalies (pure Python) on planted copies: each anomaly found at its
exact place, and nothing on the clean copy (the negative control)."""

from __future__ import annotations

import pytest
from copy_planted import ALSO, clean_copies, planted

from eoslab.rundir import COPY_ANOMALIES
from eoslab.verify.copy.naive import copy_anomalies, count_copy_anomalies


def test_the_clean_copy_has_no_copy_anomaly() -> None:
    copied = clean_copies()
    assert len(copied.records()) == len(copied.history.reads)  # the foreign record left out
    counts = count_copy_anomalies(
        copied.history.transactions, copied.history.reads, copied.records(), copied.committed
    )
    assert counts == dict.fromkeys(COPY_ANOMALIES, 0)


@pytest.mark.parametrize("name", COPY_ANOMALIES)
def test_a_planted_copy_anomaly_is_found_where_it_is(name: str) -> None:
    copied, where = planted(name)
    found = copy_anomalies(
        copied.history.transactions, copied.history.reads, copied.records(), copied.committed
    )
    assert found[name] == where
    others = {n: len(rows) for n, rows in found.items() if n != name}
    assert others == {n: ALSO.get(name, {}).get(n, 0) for n in others}
