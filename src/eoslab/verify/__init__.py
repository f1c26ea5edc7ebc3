"""The checker: reads a run's topic (Spark's Kafka source) and history, derives anomalies,
validates the Great Expectations suites, and writes the verdict under ``RUN_DIR/checker/``."""
