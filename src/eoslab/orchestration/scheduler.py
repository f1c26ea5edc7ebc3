"""The matrix through the lab's own Airflow scheduler: a DAG run triggered over Airflow's REST
API (the lab's admin user), watched until it ends.

This is how the lanes run at once (:mod:`~eoslab.orchestration.lanes`): the scheduler honours
the lanes' pools and starts the tasks of different lanes side by side, where `airflow dags test`
runs one task at a time. `eoslab orchestrate matrix` takes this way when the lab runs Airflow
(`make lab`), else `airflow dags test` (one lane: `make lab LANES=0`, or a lab without Airflow).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from eoslab.clock import wait_until
from eoslab.runtime.airflow import ADMIN_USER, AirflowHome

REQUEST_TIMEOUT_S = 10.0
HEALTHY_TIMEOUT_S = 120.0
"""How long the scheduler may take to report healthy once the API answers (a lab just up)."""
REGISTERED_TIMEOUT_S = 180.0
"""How long a DAG may take to appear once the scheduler answers (the DAG processor parses the
DAGs folder when it starts, then every few seconds)."""
FINISHED = ("success", "failed")
PAGE = 100


class SchedulerError(RuntimeError):
    """Airflow's API refused or did not answer; the message says what was asked."""


@dataclass(frozen=True)
class Scheduler:
    """The lab's Airflow API, logged in as its admin."""

    home: AirflowHome
    token: str

    @classmethod
    def of_lab(cls, home: AirflowHome) -> Scheduler | None:
        """The lab's scheduler, once healthy, when the lab runs Airflow (its API answers);
        None when it does not. SchedulerError when the scheduler is not healthy in time."""
        try:
            call_api(f"{home.url}/api/v2/monitor/health")
        except OSError:  # nothing listens: a lab without Airflow
            return None

        def healthy() -> bool:
            try:
                health = call_api(f"{home.url}/api/v2/monitor/health")
            except (OSError, SchedulerError):
                return False
            return bool(health["scheduler"]["status"] == "healthy")

        if not wait_until(healthy, HEALTHY_TIMEOUT_S, interval_s=1.0):
            raise SchedulerError(
                f"the lab's Airflow scheduler is not healthy after {HEALTHY_TIMEOUT_S:.0f} s "
                f"({home.url}/api/v2/monitor/health; its log: .lab/logs/airflow-scheduler.log)"
            )
        body = {"username": ADMIN_USER, "password": home.password()}
        return cls(home, str(call_api(f"{home.url}/auth/token", body=body)["access_token"]))

    def _dag(self, dag_id: str) -> str:
        return f"{self.home.url}/api/v2/dags/{quote(dag_id)}"

    def trigger(self, dag_id: str, run_id: str, logical_date: str, conf: dict[str, Any]) -> None:
        """A run of ``dag_id`` with ``conf``, once the DAG processor has registered the DAG."""

        def registered() -> bool:
            try:
                return bool(call_api(self._dag(dag_id), token=self.token))
            except SchedulerError:
                return False

        if not wait_until(registered, REGISTERED_TIMEOUT_S, interval_s=1.0):
            raise SchedulerError(
                f"Airflow has not registered {dag_id} within {REGISTERED_TIMEOUT_S:.0f} s "
                "(its DAG processor's log says why)"
            )
        body = {"dag_run_id": run_id, "logical_date": logical_date, "conf": conf}
        call_api(f"{self._dag(dag_id)}/dagRuns", token=self.token, body=body)

    def state(self, dag_id: str, run_id: str) -> str:
        """queued, running, success or failed."""
        return str(
            call_api(f"{self._dag(dag_id)}/dagRuns/{quote(run_id)}", token=self.token)["state"]
        )

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The run's task instances, as the API gives them (task_id, map_index, state, pool,
        start_date, ...), every page."""
        url = f"{self._dag(dag_id)}/dagRuns/{quote(run_id)}/taskInstances"
        found: list[dict[str, Any]] = []
        while True:
            page = call_api(f"{url}?limit={PAGE}&offset={len(found)}", token=self.token)
            found += page["task_instances"]
            if not page["task_instances"] or len(found) >= page["total_entries"]:
                return found

    def fail(self, dag_id: str, run_id: str) -> None:
        """Mark the run failed (the matrix was interrupted): its running tasks are stopped."""
        call_api(
            f"{self._dag(dag_id)}/dagRuns/{quote(run_id)}",
            token=self.token,
            body={"state": "failed"},
            method="PATCH",
        )


def call_api(
    url: str, *, token: str | None = None, body: dict[str, Any] | None = None, method: str = ""
) -> Any:
    """One call of Airflow's REST API (a POST of ``body`` when given): its JSON answer.
    SchedulerError when it answers an HTTP error; OSError when nothing answers."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        headers={
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        },
        method=method or None,
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:300]
        raise SchedulerError(
            f"{method or request.get_method()} {url}: {error.code} {detail}"
        ) from error
