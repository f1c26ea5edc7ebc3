"""Fault spec validation: every refusal names the field at fault."""

import pytest

from eoslab.proxy.faults import parse_fault_spec
from eoslab.proxy.faults.drop_response import DropResponseSpec
from eoslab.proxy.faults.error import ErrorSpec
from eoslab.proxy.faults.latency import LatencySpec
from eoslab.proxy.faults.reset import ResetSpec
from eoslab.proxy.faults.spec import Direction, FaultSpecError

ROUTES = ("kafka-1", "kafka-2", "refbroker")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "flood"}, "kind: unknown fault kind 'flood'"),
        ({"route": "kafka-1"}, "kind: must be one of drop-request, drop-response"),
        ({"kind": "delay", "ms": 5, "route": "kafka-9"}, "route: unknown route 'kafka-9'"),
        ({"kind": "delay", "ms": 5, "api": "Produse"}, "api: unknown API name 'Produse'"),
        ({"kind": "delay", "ms": 5, "api": 999}, "api: unknown API key 999"),
        (
            {"kind": "drop-request", "count": -1},
            "count: Input should be greater than or equal to 1",
        ),
        ({"kind": "drop-response", "probability": 1.5}, "probability: Input should be less than"),
        ({"kind": "drop-response", "probability": -0.1}, "probability: Input should be greater"),
        ({"kind": "delay", "ms": -3}, "ms: Input should be greater than or equal to 0"),
        ({"kind": "latency"}, "mean_ms: Field required"),
        ({"kind": "bandwidth", "bytes_per_s": 0}, "bytes_per_s: Input should be greater than 0"),
        ({"kind": "delay", "ms": 1, "direction": "sideways"}, "direction: Input should be"),
        ({"kind": "blackhole", "api": "Produce"}, "api: Extra inputs are not permitted"),
        ({"kind": "delay", "ms": 1, "start_ms": 500, "end_ms": 100}, "end_ms: must be after"),
        ({"kind": "delay", "ms": 1, "start_ms": 0, "end_at_ms": 10**12}, "start_at_ms: give"),
        ({"kind": "reset", "immediate": True, "count": 1}, "count: an immediate reset takes"),
        (
            {"kind": "error", "api": "Produce", "error": "OUT_OF_ORDER_SEQ", "mode": "rewrite"},
            "error: unknown Kafka error 'OUT_OF_ORDER_SEQ'",
        ),
        ({"kind": "error", "api": "Produce", "error": 9999, "mode": "reject"}, "error: unknown"),
        ({"kind": "error", "api": "Produce", "error": "NONE", "mode": "reject"}, "error: NONE is"),
        ({"kind": "error", "error": 7, "mode": "reject"}, "api: Field required"),
        ({"kind": "error", "api": "*", "error": 7, "mode": "reject"}, "api: name one API"),
        (
            {"kind": "error", "api": "SaslHandshake", "error": 7, "mode": "reject"},
            "api: the proxy cannot encode SaslHandshake messages (it can: Produce, Fetch",
        ),
        ({"kind": "error", "api": "Produce", "error": 7}, "mode: Field required"),
        ({"kind": "error", "api": "Produce", "error": 7, "mode": "lie"}, "mode: Input should be"),
        (
            {
                "kind": "error",
                "api": "InitProducerId",
                "error": 7,
                "mode": "reject",
                "partition": 1,
            },
            "partition: InitProducerId has no per-partition results (these have: Produce, Fetch",
        ),
        (
            {
                "kind": "error",
                "api": "Produce",
                "error": 7,
                "mode": "reject",
                "direction": "request",
            },
            "direction: Extra inputs are not permitted",
        ),
        ({"kind": "late", "api": "Produce", "after_ms": 10}, "forward: Field required"),
        ({"kind": "late", "api": "Produce", "forward": True}, "after_ms: say when to deliver"),
        (
            {"kind": "late", "api": "Produce", "forward": True, "after_api": "EndTx"},
            "after_api: unknown API name 'EndTx'",
        ),
        (
            {"kind": "late", "api": "Produce", "forward": True, "after_api": ["Produce", "EndTx"]},
            "after_api: unknown API name 'EndTx'",
        ),
        (
            {"kind": "late", "api": "Produce", "forward": True, "after_api": []},
            "after_api: name at least one Kafka API",
        ),
        (
            {"kind": "late", "api": "Produce", "forward": True, "after_ms": 1, "count": 101},
            "count: Input should be less than or equal to 100",
        ),
    ],
)
def test_invalid_specs_are_refused_naming_the_field(spec: dict[str, object], message: str) -> None:
    with pytest.raises(FaultSpecError) as refusal:
        parse_fault_spec(spec, ROUTES)

    assert message in str(refusal.value)


def test_every_problem_is_reported_on_its_own_line() -> None:
    with pytest.raises(FaultSpecError) as refusal:
        parse_fault_spec({"kind": "drop-response", "route": "nope", "count": 0}, ROUTES)

    lines = str(refusal.value).splitlines()
    assert [line.split(":")[0] for line in lines] == ["route", "count"]


def test_api_is_accepted_by_name_or_number_and_kept_by_name() -> None:
    by_name = parse_fault_spec({"kind": "drop-response", "api": "produce", "reset": True}, ROUTES)
    by_number = parse_fault_spec({"kind": "drop-response", "api": 22}, ROUTES)

    assert isinstance(by_name, DropResponseSpec)
    assert isinstance(by_number, DropResponseSpec)
    assert (by_name.api, by_name.selected_api(), by_name.reset) == ("Produce", 0, True)
    assert (by_number.api, by_number.selected_api()) == ("InitProducerId", 22)


def test_defaults_select_every_route_and_api() -> None:
    spec = parse_fault_spec({"kind": "latency", "mean_ms": 20, "jitter_ms": 5}, ROUTES)

    assert isinstance(spec, LatencySpec)
    assert (spec.route, spec.api, spec.direction, spec.count, spec.probability) == (
        "*",
        "*",
        None,
        None,
        None,
    )


def test_an_error_fault_keeps_kafka_names_for_its_api_and_error() -> None:
    spec = parse_fault_spec(
        {"kind": "error", "api": 0, "error": "out_of_order_sequence_number", "mode": "rewrite"}
    )

    assert isinstance(spec, ErrorSpec)
    assert (spec.api, spec.error, spec.code, spec.selected_direction()) == (
        "Produce",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        45,
        Direction.RESPONSE,
    )


def test_routes_are_checked_only_against_a_known_route_list() -> None:
    spec = parse_fault_spec({"kind": "reset", "immediate": True, "route": "anywhere"})

    assert isinstance(spec, ResetSpec)
    assert spec.route == "anywhere"
