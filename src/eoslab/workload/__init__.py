"""The workload: producer, consumer, transactional and copier sessions as OS processes (one
folder per half), the journals they leave for the checker, and the sessions' supervisors."""
