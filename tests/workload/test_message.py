"""The message format (version 2, version 1 still read): what the producer writes is what the
checker parses, and a value changed on the way fails its checksum."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslab.message import (
    FIELD_INDEX,
    FIELDS,
    CorruptMessageError,
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
    assert parts[0] == "eos2"
    assert parts[FIELD_INDEX["seq"]] == "3"
    signed = encode_value(message).rpartition(b"|")[0]
    assert parts[FIELD_INDEX["checksum"]] == f"{zlib.crc32(signed):08x}"
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
        (b"k", b"eos3|r|s|0|0|0|k|0|", "format tag"),
        (b"k", b"eos1|r|s|0|0|0|k|0", "8 fields"),
        (b"k", b"eos2|r|s|0|0|0|k|0|", "9 fields, expected 10"),
        (b"k", b"eos1|r|s|zero|0|0|k|0|", "bad field"),
        (b"other", b"eos1|r|s|0|0|0|k|0|", "differs"),
        (b"k", b"\xff\xfe", "format tag"),
        (b"k", b"eos1|r|\xff|0|0|0|k|0|", "UTF-8"),
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


def test_version_1_values_are_still_read_and_never_judged_by_a_checksum() -> None:
    assert decode(b"k", b"eos1|r|s|0|1|2|k|3|") == Message("r", "s", 0, 1, 2, "k", 3)


@pytest.mark.parametrize("field", ["partition", "seq", "checksum"])
def test_a_value_changed_on_the_way_fails_its_checksum_and_says_what_it_parses_as(
    field: str,
) -> None:
    value = bytearray(encode_value(Message("r", "s" * 32, 0, 2, 17, "k", 3)))
    at = sum(len(part) + 1 for part in value.split(b"|")[: FIELD_INDEX[field]])
    value[at] = ord("9") if value[at] != ord("9") else ord("8")  # a digit still: it parses
    with pytest.raises(CorruptMessageError, match="checksum") as refused:
        decode(b"k", bytes(value))
    assert (refused.value.message.run_id, refused.value.message.session_id) == ("r", "s" * 32)
