"""The producer half of the workload: a producer session (its own OS process), what it sends
next, its statistics, and the history it leaves: each record's outcome, and the send journal
that settles a killed session."""
