"""The v1 message format: what the producer writes is what the checker parses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslab.message import (
    FIELD_INDEX,
    FIELDS,
    Message,
    MessageFormatError,
    decode,
    encode_key,
    encode_value,
    padding_for,
)

safe_text = st.text(
    alphabet=st.characters(blacklist_characters="|", blacklist_categories=("Cs",)), min_size=1
)


messages = st.builds(
    Message,
    run_id=safe_text,
    session_id=st.uuids().map(lambda u: u.hex),
    producer=st.integers(0, 31),
    partition=st.integers(0, 1000),
    seq=st.integers(0, 2**40),
    key=safe_text,
    key_seq=st.integers(0, 2**40),
    padding=st.integers(0, 50).map(lambda n: "x" * n),
)


@given(messages)
def test_round_trip(message: Message) -> None:
    assert decode(encode_key(message), encode_value(message)) == message


def test_the_split_positions_are_the_documented_ones() -> None:
    message = Message("20261121T231500Z-baseline-kafka-ab12", "a" * 32, 1, 2, 3, "k17", 4, "xx")
    parts = encode_value(message).decode().split("|")
    assert FIELDS[0] == "tag"
    assert parts[0] == "eos1"
    assert parts[FIELD_INDEX["seq"]] == "3"
    assert parts[FIELD_INDEX["key_seq"]] == "4"
    assert parts[FIELD_INDEX["key"]] == "k17"
    assert len(parts) == len(FIELDS)


def test_padding_reaches_the_value_size() -> None:
    message = Message("run", "s" * 32, 0, 0, 0, "k1", 0)
    padded = Message("run", "s" * 32, 0, 0, 0, "k1", 0, padding_for(message, 200))
    assert len(encode_value(padded)) == 200
    assert padding_for(message, 5) == ""


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"k", b"eos2|r|s|0|0|0|k|0|", "format tag"),
        (b"k", b"eos1|r|s|0|0|0|k|0", "8 fields"),
        (b"k", b"eos1|r|s|zero|0|0|k|0|", "bad field"),
        (b"other", b"eos1|r|s|0|0|0|k|0|", "differs"),
        (b"k", b"\xff\xfe", "UTF-8"),
        (b"k", None, "null value"),
        (b"k", b"eos1|r|s|0|0|-1|k|0|", ">= 0"),
    ],
)
def test_foreign_or_corrupt_records_are_refused(
    key: bytes, value: bytes | None, reason: str
) -> None:
    with pytest.raises(MessageFormatError, match=reason):
        decode(key, value)


def test_a_separator_inside_a_field_is_refused_at_encoding() -> None:
    with pytest.raises(MessageFormatError, match="key must not contain"):
        Message("run", "s", 0, 0, 0, "k|1", 0)
