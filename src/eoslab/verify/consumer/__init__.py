"""The consumer half of the checker: the consumption ledger (what each member processed and
committed, and the effects in the sink), the consumer anomalies derived from it, and their
naive twin."""
