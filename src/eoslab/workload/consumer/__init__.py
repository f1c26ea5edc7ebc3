"""The consumer half of the workload: a consumer session (its own OS process) in one of the
handler modes, the consumer workload as a whole, and the consumption journal it leaves."""
