"""Nemesis: the Kafka-aware chaos proxy, process faults and fault timelines."""
