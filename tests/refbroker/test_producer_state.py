"""The producer-state rules, exhaustively and as properties (pure logic, no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from eoslab.refbroker.batch_header import MAX_SEQUENCE, BatchHeader
from eoslab.refbroker.producer_state import (
    ProducerAppendInfo,
    ProducerStateError,
    ProducerStateManager,
    Rules,
)

PID = 1_000_000_007
NONE = ErrorCode.none
OOO = ErrorCode.out_of_order_sequence_number
FENCED = ErrorCode.invalid_producer_epoch
UNKNOWN = ErrorCode.unknown_producer_id


def header(
    epoch: int, first_seq: int, count: int = 1, pid: int = PID, ts: int = 1000
) -> BatchHeader:
    return BatchHeader(
        base_offset=0,
        batch_length=49,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=ts,
        max_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=first_seq,
        records_count=count,
    )


class MiniLog:
    """The offset bookkeeping of a log around a ProducerStateManager, as PartitionLog does it."""

    def __init__(self, rules: Rules, retained: int = 5) -> None:
        self.state = ProducerStateManager(rules, retained, producer_id_expiration_ms=10_000)
        self.end = 0
        self.appended: list[tuple[int, int, int]] = []  # (epoch, first seq, last seq)

    def send(self, batch: BatchHeader) -> tuple[ErrorCode, int]:
        duplicate = self.state.find_duplicate_batch(batch)
        if duplicate is not None:
            return NONE, duplicate.first_offset
        try:
            info = self.state.prepare_update(batch)
        except ProducerStateError as refused:
            return refused.error, -1
        base = self.end
        self.state.update(info, base)
        self.end += batch.last_offset_delta + 1
        self.appended.append((batch.producer_epoch, batch.base_sequence, batch.last_sequence))
        return NONE, base


RULE_TABLE = [
    # rules, current (epoch, last seq) or None, incoming (epoch, first seq), expected
    (Rules.KAFKA_3_9, (0, 4), (0, 5), NONE),
    (Rules.KAFKA_3_9, (0, 4), (0, 7), OOO),  # a gap
    (Rules.KAFKA_3_9, (0, 4), (0, 3), OOO),  # an old retry that is not cached
    (Rules.KAFKA_3_9, (3, 4), (2, 5), FENCED),  # lower epoch
    (Rules.KAFKA_3_9, (3, 4), (4, 0), NONE),  # higher epoch from 0
    (Rules.KAFKA_3_9, (3, 4), (4, 5), OOO),  # higher epoch not from 0
    (Rules.KAFKA_3_9, (0, MAX_SEQUENCE), (0, 0), NONE),  # wrap
    (Rules.KAFKA_3_9, (0, MAX_SEQUENCE), (0, 1), OOO),
    (Rules.KAFKA_3_9, None, (0, 0), NONE),
    (Rules.KAFKA_3_9, None, (0, 42), NONE),  # no state: any sequence
    (Rules.KAFKA_3_9, None, (-1, 42), NONE),
    (Rules.KAFKA_2_0, (0, 4), (0, 5), NONE),
    (Rules.KAFKA_2_0, (0, 4), (0, 7), OOO),
    (Rules.KAFKA_2_0, (3, 4), (2, 5), FENCED),
    (Rules.KAFKA_2_0, (3, 4), (4, 0), NONE),
    (Rules.KAFKA_2_0, (3, 4), (4, 5), OOO),
    (Rules.KAFKA_2_0, (0, MAX_SEQUENCE), (0, 0), NONE),
    (Rules.KAFKA_2_0, None, (0, 0), NONE),
    (Rules.KAFKA_2_0, None, (0, 42), UNKNOWN),  # difference 1
    (Rules.KAFKA_2_0, None, (-1, 42), OOO),  # difference 2
    (Rules.KAFKA_2_0, None, (-1, 0), NONE),
    (Rules.LEGACY, (3, 4), (2, 99), NONE),
    (Rules.LEGACY, None, (0, 42), NONE),
]


@pytest.mark.parametrize(("rules", "current", "incoming", "expected"), RULE_TABLE)
def test_rule_table(
    rules: Rules, current: tuple[int, int] | None, incoming: tuple[int, int], expected: ErrorCode
) -> None:
    log = MiniLog(rules)
    if current is not None:
        epoch, last_seq = current
        log.state.update(ProducerAppendInfo.of(header(epoch, last_seq)), 0)
        log.end = 1
    end_before = log.end
    error, base = log.send(header(*incoming))
    assert error == expected
    if error == NONE:
        assert (base, log.end) == (end_before, end_before + 1)
    else:
        assert (base, log.end, log.appended) == (-1, end_before, [])


@pytest.mark.parametrize("rules", [Rules.KAFKA_3_9, Rules.KAFKA_2_0])
def test_retry_of_any_cached_batch_is_answered_with_its_original_offset(rules: Rules) -> None:
    log = MiniLog(rules)
    offsets = [log.send(header(0, seq * 3, count=3))[1] for seq in range(5)]
    assert offsets == [0, 3, 6, 9, 12]
    for seq, offset in enumerate(offsets):
        assert log.send(header(0, seq * 3, count=3)) == (NONE, offset)
    assert len(log.appended) == 5


@pytest.mark.parametrize("rules", [Rules.KAFKA_3_9, Rules.KAFKA_2_0])
def test_retry_that_fell_out_of_the_cache_is_out_of_order(rules: Rules) -> None:
    log = MiniLog(rules)
    for seq in range(6):
        log.send(header(0, seq))
    assert log.send(header(0, 0)) == (OOO, -1)
    assert log.send(header(0, 1)) == (NONE, 1)


def test_duplicate_needs_the_exact_sequence_range_and_epoch() -> None:
    log = MiniLog(Rules.KAFKA_3_9)
    log.send(header(0, 0, count=2))
    assert log.send(header(0, 0, count=1)) == (OOO, -1)
    assert log.send(header(1, 0, count=2)) == (NONE, 2)  # new epoch from 0: appended again


def test_epoch_bump_clears_the_batch_cache() -> None:
    log = MiniLog(Rules.KAFKA_3_9)
    log.send(header(0, 0))
    log.send(header(1, 0))
    assert log.send(header(0, 0)) == (FENCED, -1)
    assert log.send(header(1, 0)) == (NONE, 1)


def test_legacy_appends_every_retry() -> None:
    log = MiniLog(Rules.LEGACY)
    assert [log.send(header(0, 0))[1] for _ in range(3)] == [0, 1, 2]


def test_wrapping_batch_duplicate_offset_differs_between_2_0_and_3_9() -> None:
    answers = {}
    for rules in (Rules.KAFKA_3_9, Rules.KAFKA_2_0):
        log = MiniLog(rules)
        log.state.update(ProducerAppendInfo.of(header(0, MAX_SEQUENCE - 2)), 0)
        log.end = 1
        first = header(0, MAX_SEQUENCE - 1, count=4)  # sequences MAX-1, MAX, 0, 1
        assert first.last_sequence == 1
        assert log.send(first) == (NONE, 1)
        answers[rules] = log.send(first)
    assert answers[Rules.KAFKA_3_9] == (NONE, 1)
    assert answers[Rules.KAFKA_2_0] == (NONE, 4 - (1 - (MAX_SEQUENCE - 1)))  # difference 4


@pytest.mark.parametrize(("rules", "removed"), [(Rules.KAFKA_2_0, 1), (Rules.KAFKA_3_9, 0)])
def test_log_start_offset_drops_producer_state_only_under_2_0(rules: Rules, removed: int) -> None:
    log = MiniLog(rules)
    log.send(header(0, 0, pid=1))
    log.send(header(0, 0, pid=2))
    assert log.state.on_log_start_offset_incremented(1) == removed
    assert log.state.last_entry(2) is not None
    after = log.send(header(0, 1, pid=1))
    assert after == ((UNKNOWN, -1) if rules is Rules.KAFKA_2_0 else (NONE, 2))


def test_expiry_idle_forced_and_per_producer() -> None:
    log = MiniLog(Rules.KAFKA_3_9)
    log.send(header(0, 0, pid=1, ts=1000))
    log.send(header(0, 0, pid=2, ts=5000))
    assert log.state.remove_expired(10_999) == 0
    assert log.state.remove_expired(11_000) == 1  # now - last timestamp >= expiration
    assert log.state.last_entry(1) is None
    assert log.state.remove_expired(0, producer_id=1, force=True) == 0
    assert log.state.remove_expired(0, producer_id=2, force=True) == 1
    assert log.state.active_producers() == []


def test_shrinking_the_window_forgets_older_batches() -> None:
    log = MiniLog(Rules.KAFKA_3_9)
    for seq in range(5):
        log.send(header(0, seq))
    log.state.set_retained_batches(1)
    assert log.send(header(0, 3)) == (OOO, -1)
    assert log.send(header(0, 4)) == (NONE, 4)
    with pytest.raises(ValueError, match="at least one"):
        log.state.set_retained_batches(0)


@pytest.mark.parametrize(
    ("retained", "retry", "differs"),
    [
        (1, 3, True),  # refused, where Kafka's cache (3-7) still holds it
        (1, 7, False),  # the last batch: cached here as in Kafka
        (1, 2, False),  # past Kafka's five too: refused by both
        (8, 1, True),  # answered from the cache, past Kafka's five
        (8, 3, False),  # within Kafka's five: cached in both
        (5, 0, False),  # Kafka's own size: never differs
    ],
)
def test_a_cache_of_another_size_says_when_it_answers_otherwise_than_kafkas(
    retained: int, retry: int, differs: bool
) -> None:
    """The evidence of a retained-batches fault: a retry the cache answered otherwise than
    Kafka's 5-batch cache would have."""
    log = MiniLog(Rules.KAFKA_3_9, retained=retained)
    for seq in range(8):
        log.send(header(0, seq))
    batch = header(0, retry)
    found = log.state.find_duplicate_batch(batch)
    assert log.state.cache_differs(batch, found) is differs


def test_load_skips_expired_entries_and_under_2_0_those_below_log_start() -> None:
    for rules, kept in ((Rules.KAFKA_3_9, {1, 2}), (Rules.KAFKA_2_0, {2})):
        source = MiniLog(rules)
        source.send(header(0, 0, pid=1, ts=100))
        source.send(header(0, 0, pid=2, ts=100))
        source.send(header(0, 0, pid=3, ts=-50_000))
        target = ProducerStateManager(rules, 5, producer_id_expiration_ms=10_000)
        target.load(source.state.active_producers(), now_ms=200, log_start_offset=1)
        assert {e.producer_id for e in target.active_producers()} == kept


@st.composite
def retry_schedules(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    """(retained, [(batch size, pick)]): pick 0 sends the next batch, pick < 0 retries one of
    the last `retained`, pick 1 skips one (a gap)."""
    retained = draw(st.integers(1, 6))
    steps = draw(
        st.lists(st.tuples(st.integers(1, 4), st.integers(-retained, 1)), min_size=1, max_size=80)
    )
    return retained, steps


@settings(max_examples=200, deadline=None)
@given(retry_schedules(), st.sampled_from([Rules.KAFKA_3_9, Rules.KAFKA_2_0]))
def test_any_interleaving_of_retries_within_the_window_is_exactly_once(
    schedule: tuple[int, list[tuple[int, int]]], rules: Rules
) -> None:
    """A producer sends its next batch or retries one of the last `retained` ones, in any order:
    the log holds each batch once, in sequence order, and every retry gets the first offset."""
    retained, steps = schedule
    log = MiniLog(rules, retained)
    batches: list[tuple[int, int]] = []  # (first seq, count) of batch i
    offsets: dict[int, int] = {}
    for size, pick in [(1, 0), *steps]:  # batch 0 first: with no state any sequence is accepted
        index = max(0, len(offsets) + pick)
        while len(batches) <= index:
            first = batches[-1][0] + batches[-1][1] if batches else 0
            batches.append((first, size))
        first, count = batches[index]
        error, base = log.send(header(0, first, count))
        if index < len(offsets):
            assert (error, base) == (NONE, offsets[index])
        elif index == len(offsets):
            assert error == NONE
            offsets[index] = base
        else:
            assert (error, base) == (OOO, -1)
    sequences = [seq for _, first, last in log.appended for seq in range(first, last + 1)]
    assert sequences == list(range(len(sequences)))
    assert len(log.appended) == len(offsets)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30))
def test_legacy_appends_everything(firsts: list[int]) -> None:
    log = MiniLog(Rules.LEGACY)
    for first in firsts:
        assert log.send(header(0, first))[0] == NONE
    assert len(log.appended) == len(firsts)
