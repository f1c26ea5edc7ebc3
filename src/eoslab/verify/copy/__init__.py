"""The copy half of the checker: the copy ledger (every input record beside its copies in the
output topic), its anomalies, and their naive twin."""
