"""eoslab: a conformance lab for Kafka's idempotent producer."""

__version__ = "0.1.0"
