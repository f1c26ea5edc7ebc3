"""The proxy's control API (JSON over HTTP on 127.0.0.1, default port 8474).

POST   /faults        a fault spec → {"id": "f1"}       (400 names the invalid field)
GET    /faults        [{"id", "spec", "matched", "injected", "exhausted", "evidence"}, ...]
GET    /faults/<id>   one of them                       (404 if unknown; faults stay listed,
                                                          with their evidence, until removed)
DELETE /faults/<id>   remove one fault                  (404 if unknown)
DELETE /faults        remove all faults
GET    /counters      {"routes": {route: {...}}, "faults": {id: {"matched", "injected"}},
                       "fronting": what a fronting proxy rewrote and handed out, else null}
GET    /log           the fault log entries
"""

from __future__ import annotations

from http import HTTPStatus

from eoslab.control.http import HttpError, JsonHttpServer, json_object
from eoslab.proxy.faults.spec import FaultSpecError
from eoslab.proxy.server import ChaosProxy


def control_api(proxy: ChaosProxy) -> JsonHttpServer:
    def add(body: bytes) -> dict[str, str]:
        try:
            return {"id": proxy.add_fault(json_object(body)).id}
        except FaultSpecError as error:
            raise HttpError(HTTPStatus.BAD_REQUEST, str(error)) from None

    def remove(fault_id: str) -> dict[str, str]:
        if not proxy.faults.remove(fault_id):
            raise HttpError(HTTPStatus.NOT_FOUND, f"no fault {fault_id!r}")
        return {"removed": fault_id}

    def one(fault_id: str) -> dict[str, object]:
        for fault in proxy.faults:
            if fault.id == fault_id:
                return fault.describe()
        raise HttpError(HTTPStatus.NOT_FOUND, f"no fault {fault_id!r}")

    def clear() -> dict[str, str]:
        proxy.faults.clear()
        return {"removed": "all"}

    def counters() -> dict[str, object]:
        return {
            "routes": proxy.counters.snapshot(),
            "fronting": None if proxy.fronting is None else proxy.fronting.snapshot(),
            "faults": {
                fault.id: {"kind": fault.kind, "matched": fault.matched, "injected": fault.injected}
                for fault in proxy.faults
            },
        }

    return JsonHttpServer(
        "chaos proxy control API",
        {
            ("POST", "/faults"): lambda _params, body: add(body),
            ("GET", "/faults"): lambda _p, _b: [fault.describe() for fault in proxy.faults],
            ("DELETE", "/faults"): lambda _p, _b: clear(),
            ("GET", "/faults/{fault_id}"): lambda params, _b: one(params["fault_id"]),
            ("DELETE", "/faults/{fault_id}"): lambda params, _b: remove(params["fault_id"]),
            ("GET", "/counters"): lambda _p, _b: counters(),
            ("GET", "/log"): lambda _p, _b: proxy.fault_log.entries(),
        },
    )
