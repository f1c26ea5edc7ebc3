"""The producer half of the checker: the ledger of a run's log beside its history, the producer
anomalies derived from it, and their naive twin."""
