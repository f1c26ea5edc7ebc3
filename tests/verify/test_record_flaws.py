"""What a record of the log is, told apart alike by Spark (plain SQL: split, crc32, conv) and by
the naive checker (the workload's own decoder): the run's, foreign, or the run's but flawed —
misplaced (in another partition than its value names) or corrupt (a version-2 value that parses
and fails its checksum). A version-1 value (a run from before the checksum) is still the run's,
and is never judged corrupt."""

from __future__ import annotations

from pyspark.sql import SparkSession

from eoslab.message import Message, encode_value
from eoslab.verify.producer import naive
from eoslab.verify.topic_reader import classify

RUN = "flaws-run"
SESSION = "a" * 32
WHOLE = encode_value(Message(RUN, SESSION, 0, 1, 7, "k1", 3))
V1 = b"eos1|" + RUN.encode() + b"|" + SESSION.encode() + b"|0|1|8|k1|4|xx"
RECORDS: list[tuple[bytes, int, str | None]] = [
    (WHOLE, 1, None),
    (V1, 1, None),  # an old run's record: still read
    (WHOLE, 2, "misplaced"),
    (V1, 0, "misplaced"),
    (WHOLE.replace(b"|7|", b"|9|"), 1, "corrupt"),  # a changed seq: parses, checksum fails
    (WHOLE[:-1] + (b"0" if WHOLE[-1:] != b"0" else b"1"), 1, "corrupt"),  # a changed checksum
    (WHOLE.replace(b"|7|", b"|9|"), 2, "corrupt"),  # corrupt first: its partition is no word
    (WHOLE.replace(b"|7|", b"|x|"), 1, "foreign"),  # no longer parses: not recognisably ours
    (WHOLE.replace(RUN.encode(), b"other-run"), 1, "foreign"),
    (V1.replace(b"eos1", b"eos2"), 1, "foreign"),  # a version-2 tag without a checksum
    (b"\xff\xfe garbage", 1, "foreign"),
]


def test_spark_and_the_naive_checker_tell_flawed_records_from_foreign_ones(
    spark: SparkSession,
) -> None:
    raw = spark.createDataFrame(
        [(partition, offset, value) for offset, (value, partition, _) in enumerate(RECORDS)],
        "partition int, offset long, value binary",
    )
    reasons = {
        row["offset"]: row["reason"]
        for row in classify(raw, RUN).select("offset", "reason").collect()
    }
    spark_said = [
        None
        if reasons[offset] is None
        else reasons[offset]
        if reasons[offset] in ("misplaced", "corrupt")
        else "foreign"
        for offset in range(len(RECORDS))
    ]
    naive_said = [
        getattr(naive.classify_record(None, value, partition, offset, RUN), "reason", None)
        for offset, (value, partition, _) in enumerate(RECORDS)
    ]
    assert spark_said == [expected for _, _, expected in RECORDS]
    assert naive_said == spark_said
