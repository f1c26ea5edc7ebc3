"""The reference broker: Kafka wire protocol + the idempotent-producer rules of the spec."""
