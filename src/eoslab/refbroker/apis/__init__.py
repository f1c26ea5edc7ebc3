"""The Kafka APIs the reference broker serves, one handler per API key."""

from __future__ import annotations

from eoslab.refbroker.apis.api_versions import ApiVersionsHandler
from eoslab.refbroker.apis.base import ApiHandler, RequestContext
from eoslab.refbroker.apis.fetch import FetchHandler
from eoslab.refbroker.apis.metadata import DescribeClusterHandler, MetadataHandler
from eoslab.refbroker.apis.offsets import DeleteRecordsHandler, ListOffsetsHandler
from eoslab.refbroker.apis.produce import ProduceHandler
from eoslab.refbroker.apis.producers import DescribeProducersHandler
from eoslab.refbroker.apis.topics import CreateTopicsHandler, DeleteTopicsHandler
from eoslab.refbroker.groups.handlers import GROUP_HANDLERS
from eoslab.refbroker.transactions.handlers import TRANSACTION_HANDLERS


def api_handlers() -> dict[int, ApiHandler]:
    """Every served API by key; ApiVersions advertises exactly this table."""
    handlers: dict[int, ApiHandler] = {
        h.api_key: h
        for h in (
            ProduceHandler(),
            FetchHandler(),
            ListOffsetsHandler(),
            MetadataHandler(),
            CreateTopicsHandler(),
            DeleteTopicsHandler(),
            DeleteRecordsHandler(),
            DescribeClusterHandler(),
            DescribeProducersHandler(),
            *(handler() for handler in (*GROUP_HANDLERS, *TRANSACTION_HANDLERS)),
        )
    }
    handlers[ApiVersionsHandler.api_key] = ApiVersionsHandler(handlers)
    return handlers


__all__ = ("ApiHandler", "ApiVersionsHandler", "RequestContext", "api_handlers")
