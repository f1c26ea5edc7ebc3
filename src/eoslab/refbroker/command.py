"""`eoslab refbroker serve`: run the reference broker until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from eoslab.control.http import stop_on_signals
from eoslab.refbroker.broker import ReferenceBroker
from eoslab.refbroker.config import DEFAULT_MAX_FRAME_BYTES, BrokerConfig
from eoslab.refbroker.control import ControlApi
from eoslab.refbroker.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DEFAULT_RETAINED_BATCHES,
    Rules,
)
from eoslab.refbroker.server import KafkaProtocolServer
from eoslab.refbroker.topic_configs import DEFAULT_MESSAGE_MAX_BYTES
from eoslab.refbroker.transactions.transaction_coordinator import (
    DEFAULT_ABORT_INTERVAL_MS,
    DEFAULT_MAX_TIMEOUT_MS,
)
from eoslab.settings import BasePort, HostPort

app = typer.Typer(help="The reference broker: Kafka's idempotent-producer rules, in Python.")
log = logging.getLogger(__name__)


@app.callback()
def refbroker() -> None:
    """The reference broker: Kafka's idempotent-producer rules, in Python."""


async def run_until_stopped(config: BrokerConfig) -> None:
    """Serve Kafka clients and the control API; on SIGTERM close gracefully (snapshots)."""
    broker = ReferenceBroker(config)
    kafka_server = KafkaProtocolServer(broker)
    control = ControlApi(broker, kafka_server)
    stopping = stop_on_signals()
    try:
        await kafka_server.start()
        await control.start()
        log.info("reference broker %d ready, advertising %s", config.node_id, config.advertised)
        await stopping.wait()
        log.info("stopping")
    finally:
        await control.stop()
        await kafka_server.stop()
        broker.close()


def _host_port(text: str) -> HostPort:
    try:
        return HostPort.parse(text)
    except ValueError as bad:
        raise typer.BadParameter(str(bad)) from None


@app.command()
def serve(
    *,
    listen: Annotated[str, typer.Option(help="Kafka listener HOST:PORT.")] = str(
        HostPort.local(BasePort.REFBROKER_CLIENT)
    ),
    advertised: Annotated[
        str | None, typer.Option(help="HOST:PORT clients are told to use (default: --listen).")
    ] = None,
    control: Annotated[str, typer.Option(help="Control API HOST:PORT.")] = str(
        HostPort.local(BasePort.REFBROKER_CONTROL)
    ),
    data_dir: Annotated[Path, typer.Option(help="Logs, PID blocks, fault log.")] = Path(
        "var/refbroker"
    ),
    zookeeper: Annotated[
        str | None, typer.Option(help="ZooKeeper HOST:PORT for PID blocks (else a file).")
    ] = None,
    rules: Annotated[Rules, typer.Option(help="Producer-state rule set.")] = Rules.KAFKA_3_9,
    fsync: Annotated[
        str, typer.Option(help="every-batch (durable acks) or os (page cache).")
    ] = "every-batch",
    retained_batches: Annotated[
        int, typer.Option(min=1, help="Batches per producer in the duplicate cache.")
    ] = DEFAULT_RETAINED_BATCHES,
    producer_id_expiration_ms: Annotated[
        int, typer.Option(min=1, help="producer.id.expiration.ms")
    ] = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    producer_id_expiration_check_interval_ms: Annotated[
        int, typer.Option(min=1, help="producer.id.expiration.check.interval.ms")
    ] = DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    node_id: Annotated[int, typer.Option(min=0, help="broker.id")] = 1,
    auto_create_topics: Annotated[
        bool, typer.Option(help="Create unknown topics on Metadata/Produce (Kafka's option).")
    ] = False,
    max_frame_bytes: Annotated[
        int, typer.Option(min=64, help="socket.request.max.bytes: larger frames close.")
    ] = DEFAULT_MAX_FRAME_BYTES,
    message_max_bytes: Annotated[
        int,
        typer.Option(
            min=0, help="message.max.bytes: the largest batch of a topic without max.message.bytes."
        ),
    ] = DEFAULT_MESSAGE_MAX_BYTES,
    group_initial_rebalance_delay_ms: Annotated[
        int, typer.Option(min=0, help="group.initial.rebalance.delay.ms")
    ] = 3000,
    group_min_session_timeout_ms: Annotated[
        int, typer.Option(min=1, help="group.min.session.timeout.ms")
    ] = 6000,
    group_max_session_timeout_ms: Annotated[
        int, typer.Option(min=1, help="group.max.session.timeout.ms")
    ] = 1_800_000,
    transaction_max_timeout_ms: Annotated[
        int, typer.Option(min=1, help="transaction.max.timeout.ms")
    ] = DEFAULT_MAX_TIMEOUT_MS,
    transaction_abort_timed_out_transaction_cleanup_interval_ms: Annotated[
        int,
        typer.Option(min=1, help="transaction.abort.timed.out.transaction.cleanup.interval.ms"),
    ] = DEFAULT_ABORT_INTERVAL_MS,
    fault_log: Annotated[
        Path | None, typer.Option(help="Fault log, JSON lines (default: DATA_DIR/faults.jsonl).")
    ] = None,
    log_file: Annotated[Path | None, typer.Option(help="Log here instead of stderr.")] = None,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING...")] = "INFO",
) -> None:
    """Run the reference broker until SIGTERM."""
    if fsync not in ("every-batch", "os"):
        raise typer.BadParameter("--fsync must be every-batch or os")
    fsync_mode: Literal["every-batch", "os"] = "every-batch" if fsync == "every-batch" else "os"
    listen_at = _host_port(listen)
    config = BrokerConfig(
        listen=listen_at,
        advertised=_host_port(advertised) if advertised else listen_at,
        control=_host_port(control),
        data_dir=data_dir,
        node_id=node_id,
        zookeeper=zookeeper,
        rules=rules,
        fsync=fsync_mode,
        retained_batches=retained_batches,
        producer_id_expiration_ms=producer_id_expiration_ms,
        producer_id_expiration_check_interval_ms=producer_id_expiration_check_interval_ms,
        auto_create_topics=auto_create_topics,
        max_frame_bytes=max_frame_bytes,
        message_max_bytes=message_max_bytes,
        fault_log=fault_log,
        group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms,
        group_min_session_timeout_ms=group_min_session_timeout_ms,
        group_max_session_timeout_ms=group_max_session_timeout_ms,
        transaction_max_timeout_ms=transaction_max_timeout_ms,
        transaction_abort_timed_out_transaction_cleanup_interval_ms=(
            transaction_abort_timed_out_transaction_cleanup_interval_ms
        ),
    )
    logging.basicConfig(
        filename=log_file,
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(run_until_stopped(config))
    except OSError as error:  # a port in use, a data directory it may not write: one line
        print(f"reference broker: {error.strerror or error}", file=sys.stderr)
        raise typer.Exit(1) from None
