"""The control API: every fault kind, its log entry, and a graceful SIGTERM."""

from __future__ import annotations

from crafted import batch_of, errors_of, fetch_values, init_producer_id, produce_request
from refbroker_process import RunningBroker, StartBroker

from eoslab.probe.client import KafkaProtocolClient


def send_one(client: KafkaProtocolClient, topic: str, pid: int, epoch: int, seq: int) -> str:
    response = client.request(produce_request(topic, 0, batch_of(pid, epoch, seq, seq, "v")))
    return errors_of([response])[0]


def test_invalid_faults_are_refused_with_400(refbroker: RunningBroker) -> None:
    for body in (
        {"kind": "no-such-fault"},
        {"kind": "drop-response", "api": "NoSuchApi", "count": 1},
        {"kind": "fail-request", "api": "produce", "count": 1, "error": "NOT_AN_ERROR"},
        {"kind": "retained-batches", "count": 0},
    ):
        status, answer = refbroker.control("POST", "/faults", body)
        assert status == 400, body
        assert "error" in answer
    assert refbroker.control("GET", "/nowhere")[0] == 404
    assert refbroker.control("PUT", "/faults")[0] == 405


def test_failed_requests_are_not_applied_and_everything_is_logged(refbroker: RunningBroker) -> None:
    refbroker.create_topic("fail", 1)
    refbroker.fault(kind="fail-request", api="Produce", count=1, error="NOT_LEADER_OR_FOLLOWER")
    status, state = refbroker.control("GET", "/faults")
    assert status == 200
    assert [(a["kind"], a["remaining"]) for a in state["armed"]] == [("fail-request", 1)]
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        refused = send_one(client, "fail", pid, epoch, 0)
        accepted = send_one(client, "fail", pid, epoch, 0)
        assert fetch_values(client, "fail") == [b"v/0"]
    assert (refused, accepted) == ("NOT_LEADER_OR_FOLLOWER", "NONE")
    assert refbroker.control("GET", "/faults")[1]["armed"] == []
    status, log = refbroker.control("GET", "/log")
    assert status == 200
    assert [entry["event"] for entry in log] == ["fault-applied", "request-failed"]
    assert all(isinstance(entry["ts_ms"], int) for entry in log)
    assert refbroker.counters()["faults"]["requests_failed"] == {"Produce": 1}


def test_legacy_rules_append_duplicates_and_delete_restores_the_rules(
    refbroker: RunningBroker,
) -> None:
    refbroker.create_topic("legacy", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        assert send_one(client, "legacy", pid, epoch, 0) == "NONE"
        assert refbroker.fault(kind="rules", rules="legacy")["rules"] == "legacy"
        assert send_one(client, "legacy", pid, epoch, 0) == "NONE"  # appended again
        assert refbroker.control("DELETE", "/faults")[0] == 200
        assert refbroker.control("GET", "/faults")[1]["rules"] == "kafka-3.9"
        assert send_one(client, "legacy", pid, epoch, 0) == "NONE"  # deduplicated again
        assert fetch_values(client, "legacy") == [b"v/0", b"v/0"]
    assert refbroker.counters()["produce"] == {
        "appended": 2,
        "deduplicated": 1,
        "rejected": {},
        "judged": {"kafka-3.9": 2, "legacy": 1},  # what a rules fault's evidence reads
        "cache_differs": 0,
    }


def test_fewer_retained_batches_shrink_the_duplicate_window(refbroker: RunningBroker) -> None:
    refbroker.create_topic("window", 1)
    refbroker.fault(kind="retained-batches", count=1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        for seq in (0, 1):
            assert send_one(client, "window", pid, epoch, seq) == "NONE"
        assert send_one(client, "window", pid, epoch, 1) == "NONE"  # the last batch: cached
        assert refbroker.counters()["produce"]["cache_differs"] == 0  # as Kafka's would
        assert send_one(client, "window", pid, epoch, 0) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    # Kafka's 5-batch cache would have answered the retry of 0: the fault's evidence
    assert refbroker.counters()["produce"]["cache_differs"] == 1


def test_crash_restart_drops_connections_and_recovers_from_disk(refbroker: RunningBroker) -> None:
    refbroker.create_topic("crash", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        for seq in range(3):
            assert send_one(client, "crash", pid, epoch, seq) == "NONE"
        applied = refbroker.fault(kind="crash-restart")
        assert applied["connections_dropped"] == 1
        assert applied["reloaded"]["records"] >= 3  # what the fault's evidence reads
        assert applied["reloaded"]["producers"] >= 1
        assert client.closed_by_peer()
    with refbroker.client() as client:
        assert send_one(client, "crash", pid, epoch, 2) == "NONE"  # still a known duplicate
        assert send_one(client, "crash", pid, epoch, 3) == "NONE"
        assert fetch_values(client, "crash") == [b"v/0", b"v/1", b"v/2", b"v/3"]
        new_pid, _ = init_producer_id(client)
    assert new_pid > pid  # the unused rest of the PID block died with the process
    assert refbroker.counters()["produce"]["deduplicated"] == 1


def test_sigterm_closes_gracefully(refbroker: RunningBroker) -> None:
    refbroker.create_topic("bye", 1)
    assert refbroker.stop() == 0
    assert "stopping" in refbroker.log_file.read_text()


def test_clearing_faults_restores_the_configured_broker(start_refbroker: StartBroker) -> None:
    """DELETE /faults (what the nemesis' heal calls) goes back to the broker as started, not to
    Kafka's defaults: here a 2-batch duplicate window."""
    broker = start_refbroker("--retained-batches", "2")
    assert broker.control("GET", "/faults")[1]["retained_batches"] == 2
    broker.fault(kind="retained-batches", count=7)
    broker.fault(kind="rules", rules="kafka-2.0")
    assert broker.control("GET", "/faults")[1]["retained_batches"] == 7
    assert broker.control("DELETE", "/faults")[0] == 200
    state = broker.control("GET", "/faults")[1]
    assert (state["retained_batches"], state["rules"]) == (2, "kafka-3.9")
