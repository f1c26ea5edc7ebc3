"""The transactions half of the checker: the transactions ledger (every transactional send
with its transaction's outcome, and what read_committed readers saw), its anomalies, and their
naive twin."""
