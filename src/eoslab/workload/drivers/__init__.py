"""Client drivers: every workload role (producer, transactional producer, reader, group
consumer, copier) runs on the Kafka client a user runs — librdkafka, Kafka's Java client or
franz-go — at the version they run. One folder per client, one contract for all:

- the roles (the sessions of ``eoslab.workload``'s producer, transactions, consumer and copy
  halves, and its ``reader``) are the application: what to send, when to commit, what a
  record's effect is, and every journal line, written by the same code whatever the client;
- a driver gives them their client as :mod:`eoslab.workload.drivers.api` shapes it
  (librdkafka's API, the one the roles were written against): librdkafka is itself, in the
  session's process; the Java client and franz-go are a small program of their own, a child
  of the session's process and in its process group, that the session talks to with the line
  protocol of :mod:`eoslab.workload.drivers.contract` (:mod:`eoslab.workload.drivers.remote`
  is the session's half);
- a client is named ``<family>:<version>`` (``librdkafka:2.2.0``, ``java:3.9.2``,
  ``franz-go:v1.22.2``; a bare version is librdkafka's), and :func:`prepare` makes it ready
  (installs or builds it once per version, cached under ``.venv-clients/``) before a run
  starts, refusing an unknown family or a version the registry does not have in one line.
"""
