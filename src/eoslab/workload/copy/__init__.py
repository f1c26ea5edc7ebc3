"""The copy half of the workload: a copier session (consume-transform-produce, its own OS
process), the copier stage as a whole, and the copy journal it leaves."""
