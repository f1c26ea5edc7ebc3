"""The transaction coordinator: Kafka's transactions (KIP-98) for the single reference broker.

transaction_coordinator.py holds the rules (TransactionCoordinator), transaction_metadata.py one
transactional id's state and transitions (TransactionMetadata), transaction_state_manager.py their
durable store (the broker's __transaction_state), handlers.py the transaction APIs' wire side.
The partitions' side (open transactions, markers, the last stable offset, aborted transactions)
lives with the log: producer_state.py, partition_log.py, control_batch.py, txn_index.py.
"""
