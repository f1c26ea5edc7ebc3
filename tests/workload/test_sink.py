"""The sink and the handler modes on real SQLite and real PostgreSQL: the same SQL, the same
effects, and a doubled or reordered effect visible in the tables."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from eoslab.message import Message
from eoslab.rundir import HANDLER_MODES
from eoslab.workload.consumer.handlers import HANDLERS
from eoslab.workload.consumer.sink.database import Sink, describe, is_postgres
from eoslab.workload.consumer.sink.effects import Delivery
from eoslab.workload.consumer.sink.orders import Command, command_of, lifecycle

SEED = 11
SESSION = "a" * 32


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "sink.sqlite")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def sink(location: str) -> Sink:
    sink = Sink(location)
    sink.create_schema()
    yield sink
    sink.close()


def delivery(
    key_seq: int, key: str = "k1", offset: int | None = None, session: str = "c1"
) -> Delivery:
    message = Message("run-1", SESSION, 0, 2, key_seq, key, key_seq)
    return Delivery(
        message,
        command_of(SEED, key, key_seq),
        2,
        key_seq if offset is None else offset,
        0,
        session,
        "member-1",
        4,
    )


def rows(sink: Sink, query: str) -> list[tuple[object, ...]]:
    with sink.transaction() as tx:
        return tx.execute(query)


def order(sink: Sink, key: str = "k1") -> tuple[object, ...]:
    [row] = rows(
        sink,
        f"SELECT state, version, changes, invalid, last_key_seq FROM orders WHERE key = '{key}'",
    )
    return row


@pytest.mark.parametrize("mode", HANDLER_MODES)
def test_a_clean_stream_lands_once_and_walks_the_state_machine(sink: Sink, mode: str) -> None:
    cycle = lifecycle(SEED, "k1")
    count = 2 * cycle + 1  # two whole orders, and the next one created
    orders = [HANDLERS[mode](sink, delivery(seq), mode, 1000 + seq) for seq in range(count)]
    assert orders == list(range(1, count + 1))
    assert order(sink) == ("CREATED", count, 0, 0, count - 1)
    effects = rows(
        sink,
        "SELECT key_seq, command, order_version, handler, generation FROM effects ORDER BY apply_order",
    )
    assert [e[0] for e in effects] == list(range(count))
    assert [e[2] for e in effects] == [seq + 1 for seq in range(count)]
    assert {e[3] for e in effects} == {mode}
    assert {e[4] for e in effects} == {4}
    commands = [e[1] for e in effects]
    assert commands[0] == commands[cycle] == Command.CREATE
    assert commands[cycle - 1] == commands[2 * cycle - 1] == Command.CANCEL
    assert set(commands[1 : cycle - 1]) == {Command.MODIFY}


@pytest.mark.parametrize(
    ("mode", "doubled"),
    [("commit-after", True), ("auto-commit", True), ("idempotent", False), ("dedup-table", False)],
)
def test_a_record_delivered_twice(sink: Sink, mode: str, doubled: bool) -> None:
    apply = HANDLERS[mode]
    assert apply(sink, delivery(0), mode, 1) == 1
    assert apply(sink, delivery(1), mode, 2) == 2
    again = apply(sink, delivery(1, offset=7, session="c2"), mode, 3)
    effects = rows(
        sink, "SELECT message_id, kafka_offset, consumer_session FROM effects ORDER BY apply_order"
    )
    if doubled:
        assert again == 3
        assert effects[1][0] == effects[2][0] == f"{SESSION}:2:1"
        assert [(e[1], e[2]) for e in effects] == [(0, "c1"), (1, "c1"), (7, "c2")]
        state, version, changes, _, last = order(sink)
        assert (state, version, changes, last) == ("MODIFIED", 3, 2, 1)  # one modify counted twice
    else:
        assert again is None
        assert len(effects) == 2
        assert order(sink) == ("MODIFIED", 2, 1, 0, 1)


def test_naive_effects_out_of_order_show_in_versions_and_invalid_transitions(sink: Sink) -> None:
    for seq in (1, 0, 2):
        HANDLERS["commit-after"](sink, delivery(seq), "commit-after", seq)
    effects = rows(sink, "SELECT key_seq, order_version FROM effects ORDER BY apply_order")
    assert effects == [(1, 1), (0, 2), (2, 3)]  # order_version != key_seq + 1: out of order
    _, version, _, invalid, last = order(sink)
    assert (version, last) == (3, 2)
    assert invalid == 2  # a modify before the create, a create on an open order


def test_the_idempotent_handler_skips_what_is_older_than_the_order(sink: Sink) -> None:
    apply = HANDLERS["idempotent"]
    assert apply(sink, delivery(1), "idempotent", 1) == 1
    assert apply(sink, delivery(0), "idempotent", 2) is None
    assert rows(sink, "SELECT key_seq FROM effects") == [(1,)]


def test_a_dedup_table_duplicate_rolls_back_its_whole_transaction(sink: Sink) -> None:
    apply = HANDLERS["dedup-table"]
    apply(sink, delivery(0), "dedup-table", 1)
    before = order(sink)
    assert apply(sink, delivery(0, session="c2"), "dedup-table", 2) is None
    assert order(sink) == before
    assert rows(sink, "SELECT message_id, consumer_session FROM processed_message") == [
        (f"{SESSION}:2:0", "c1")
    ]


@pytest.mark.parametrize("mode", ["idempotent", "dedup-table"])
def test_two_connections_racing_on_one_record_apply_it_once(
    location: str, sink: Sink, mode: str
) -> None:
    """A zombie and its successor with the same record at the same time: the order's row (or
    processed_message's key) serializes them on either engine."""
    HANDLERS[mode](sink, delivery(0), mode, 1)
    results: list[int | None] = []

    def consumer(session: str) -> None:
        own = Sink(location)
        try:
            results.append(HANDLERS[mode](own, delivery(1, session=session), mode, 2))
        finally:
            own.close()

    threads = [threading.Thread(target=consumer, args=(f"c{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results, key=lambda r: r is None) == [2, None]
    assert rows(sink, "SELECT COUNT(*) FROM effects") == [(2,)]


def test_the_schema_is_the_same_on_both_engines_and_starts_empty(sink: Sink) -> None:
    assert sink.is_empty()
    HANDLERS["commit-after"](sink, delivery(0), "commit-after", 1)
    assert not sink.is_empty()
    columns = rows(sink, "SELECT * FROM effects")
    assert len(columns[0]) == 18


def test_a_location_is_recorded_without_its_password() -> None:
    assert describe("/runs/r/sink.sqlite") == "sqlite:/runs/r/sink.sqlite"
    assert describe("postgresql://eoslab:s3cret@127.0.0.1:5433/db") == (
        "postgresql://eoslab@127.0.0.1:5433/db"
    )
    assert is_postgres("postgres://h/db")
    assert not is_postgres("sink.sqlite")
