"""What the broker did, counted: the lab compares these with what the clients saw."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from eoslab.kafka_api import api_name, error_name


@dataclass
class BrokerCounters:
    """Requests per API and the fate of every produced batch (appended, deduplicated, rejected)."""

    requests: Counter[str] = field(default_factory=Counter)
    produce_appended: int = 0
    produce_deduplicated: int = 0
    produce_rejected: Counter[str] = field(default_factory=Counter)
    produce_judged: Counter[str] = field(default_factory=Counter)
    """Batches of idempotent or transactional producers judged, per producer-state rule set in
    force: a ``rules`` fault used."""
    produce_cache_differs: int = 0
    """Retries the duplicate cache answered otherwise than Kafka's 5-batch cache would have: a
    ``retained-batches`` fault at work."""
    responses_dropped: Counter[str] = field(default_factory=Counter)
    requests_failed: Counter[str] = field(default_factory=Counter)
    requests_lost: Counter[str] = field(default_factory=Counter)
    connections_closed_on_bad_input: int = 0
    group_events: Counter[str] = field(default_factory=Counter)
    """The group coordinator's: rebalances, members_expired, commits_fenced, ..."""

    def count_request(self, api_key: int) -> None:
        self.requests[api_name(api_key)] += 1

    def count_append(
        self,
        error: ErrorCode,
        duplicate: bool,
        *,
        rules: str | None = None,
        cache_differs: bool = False,
    ) -> None:
        """One partition's batch of a Produce request: its fate, the rule set it was judged by
        (None: a batch without a producer id, which no rule judges), whether the cache answered
        it otherwise than Kafka's."""
        if rules is not None:
            self.produce_judged[rules] += 1
        self.produce_cache_differs += cache_differs
        if error is not ErrorCode.none:
            self.produce_rejected[error_name(error)] += 1
        elif duplicate:
            self.produce_deduplicated += 1
        else:
            self.produce_appended += 1

    def request_fault(self, counter: str, api: str) -> None:
        """One request met a request fault (``counter``: its ``faults`` entry below)."""
        getattr(self, counter)[api] += 1

    def as_json(self) -> dict[str, object]:
        return {
            "requests": dict(self.requests),
            "produce": {
                "appended": self.produce_appended,
                "deduplicated": self.produce_deduplicated,
                "rejected": dict(self.produce_rejected),
                "judged": dict(self.produce_judged),
                "cache_differs": self.produce_cache_differs,
            },
            "faults": {
                "responses_dropped": dict(self.responses_dropped),
                "requests_failed": dict(self.requests_failed),
                "requests_lost": dict(self.requests_lost),
            },
            "connections_closed_on_bad_input": self.connections_closed_on_bad_input,
            "groups": dict(self.group_events),
        }
