"""The workload: producer processes sending a deterministic stream, and the history ledger."""
