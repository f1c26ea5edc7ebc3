"""The transactions half of the workload: a transactional producer session (its own OS process)
and the transactions journal it leaves."""
