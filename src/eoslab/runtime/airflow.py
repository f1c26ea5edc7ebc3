"""The lab's Airflow: one AIRFLOW_HOME, configured entirely through the environment.

Every Airflow process of a lab (the API server, scheduler, DAG processor, triggerer, and an
`airflow dags test` run by `make lab` or a test) gets the same environment from
:meth:`AirflowHome.environment`, so they share one SQLite database, one JWT secret (the
scheduler's task tokens must be valid at the API server) and one generated admin password.

Nothing listens beyond loopback: the API server binds 127.0.0.1, and the components run with
``--skip-serve-logs`` (Airflow's log servers bind every interface and have no host setting;
with the LocalExecutor the API server reads the task logs from the shared folder anyway).

A lab's Airflow database is set up once by :data:`SETUP_COMMANDS` (its schema, a pool per target: its lane):
locally by :meth:`AirflowHome.prepare`, in the compose runtime by its ``airflow-init``
service, which runs ``python -m eoslab.runtime.airflow setup``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from eoslab import settings
from eoslab.rundir import LAB_TARGETS
from eoslab.settings import project_root

ADMIN_USER = "admin"
SIMPLE_AUTH_MANAGER = (
    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
)
SPARK_CONN = "eoslab_spark"
"""The checker's Spark: a Spark Connect connection (the Spark provider's ``spark_connect``
type), the lab's warm Spark unless the user sets AIRFLOW_CONN_EOSLAB_SPARK (a cluster's)."""
SPARK_CONN_VARIABLE = f"AIRFLOW_CONN_{SPARK_CONN.upper()}"
MIGRATE_TIMEOUT_S = 300.0
LANE_POOL_PREFIX = "eoslab_lane_"
CHANGED = "changed: "
"""How ``before-scheduler`` prints each change: Airflow's own warnings share its output."""


def lane_pool(target: str) -> str:
    """A target's lane: one slot, so the target's scenario runs take turns (one run's nemesis
    would break another's records) while the other targets' lanes run beside it."""
    return f"{LANE_POOL_PREFIX}{target}"


CHECKS_POOL = "eoslab_checks"
CHECKS_AT_ONCE = 2
"""The nightly DAG's checks on the warm Spark, at most this many at once: two overlap their
round trips to Spark Connect (Benchmarks: ``checks_at_once``), more only share the two cores."""

SETUP_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("db", "migrate"),
    *(
        ("pools", "set", lane_pool(target), "1", f"scenario runs on {target} take turns")
        for target in LAB_TARGETS
    ),
    ("pools", "set", CHECKS_POOL, str(CHECKS_AT_ONCE), "checks on the warm Spark"),
)
"""The one-time set-up of a lab's Airflow database, as ``airflow`` arguments, in order: without
its lane's pool, the scheduler never starts a scenario run."""


class AirflowSetupError(RuntimeError):
    """The Airflow home could not be prepared (database migration or pool set-up failed)."""


def venv_bin() -> Path:
    """The virtualenv's bin folder: `airflow` and `spark-submit` are found there first."""
    return Path(sys.executable).parent


def run_airflow(args: tuple[str, ...], env: Mapping[str, str], where: str) -> str:
    """``airflow ARGS`` with ``env``, bounded; its output. AirflowSetupError with its last lines
    if it fails (``where`` names the Airflow home for the message)."""
    return _run([str(venv_bin() / "airflow"), *args], f"airflow {' '.join(args[:2])}", env, where)


def _run(argv: list[str], name: str, env: Mapping[str, str], where: str) -> str:
    command = f"`{name}` in {where}"
    try:
        done = subprocess.run(
            argv,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=MIGRATE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise AirflowSetupError(f"{command} took over {MIGRATE_TIMEOUT_S:.0f} s") from error
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        raise AirflowSetupError(f"{command} failed:\n{tail}")
    return done.stdout


LOCAL_SETTINGS = """\
# Written by eoslab.runtime.airflow: the scheduler loads the tasks' modules before it forks.
from eoslab.orchestration.preload import preload_in_scheduler

__all__: list[str] = []  # nothing here for Airflow's settings or policies

preload_in_scheduler()
"""
"""The home's ``config/airflow_local_settings.py``, which every Airflow process imports
(:mod:`eoslab.orchestration.preload`)."""


@dataclass(frozen=True)
class AirflowHome:
    """AIRFLOW_HOME (``home``) and where the lab it drives lives."""

    home: Path
    api_port: int
    lab_dir: Path
    port_offset: int
    spark_connect_port: int | None = None
    """The lab's warm Spark, for the ``eoslab_spark`` connection (None: the lab has none)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def password_file(self) -> Path:
        """The simple auth manager's own file format: {"admin": "<password>"}."""
        return self.home / "passwords.json"

    @property
    def database(self) -> Path:
        """Airflow's database: SQLite, shared by every Airflow process of the lab."""
        return self.home / "airflow.db"

    @property
    def _secret_file(self) -> Path:
        return self.home / "jwt_secret"

    @property
    def _prepared_stamp(self) -> Path:
        """Redone when Airflow's version or the set-up changes (a pool added for a target)."""
        setup = hashlib.sha256(repr(SETUP_COMMANDS).encode()).hexdigest()[:12]
        return self.home / f".migrated-{version('apache-airflow')}-{setup}"

    @property
    def _shown_stamp(self) -> Path:
        return self.home / ".password-shown"

    def password(self) -> str:
        return json.loads(self.password_file.read_text())[ADMIN_USER]

    def environment(self) -> dict[str, str]:
        """The variables every Airflow process of this lab runs with (on top of os.environ)."""
        return {
            "AIRFLOW_HOME": str(self.home),
            "PATH": f"{venv_bin()}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(project_root() / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "6",  # a run and a check per lane
            # the DAG files parsed every 2 minutes, not 30 s: each parse costs seconds of CPU
            # that the lanes' runs and checks share on two cores
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "120",
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.password_file),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.database}",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": self._secret_file.read_text().strip(),
            **self._spark_connection(),
            settings.HOME: str(project_root()),
            settings.LAB_DIR: str(self.lab_dir),
            settings.PORT_OFFSET: str(self.port_offset),
        }

    def _spark_connection(self) -> dict[str, str]:
        """The user's Spark Connect connection, else the lab's warm Spark when the lab has one
        (without, the checker starts a Spark of its own in the task)."""
        if user_given := os.environ.get(SPARK_CONN_VARIABLE):
            return {SPARK_CONN_VARIABLE: user_given}
        if self.spark_connect_port is None:
            return {}
        lab_spark = {
            "conn_type": "spark_connect",
            "host": settings.HOST,
            "port": self.spark_connect_port,
        }
        return {SPARK_CONN_VARIABLE: json.dumps(lab_spark)}

    def prepare(self) -> AirflowHome:
        """Create the home, its secret and admin password once, and migrate the database once
        per Airflow version; write its local settings. Cheap when already done, so every
        component may call it."""
        self.home.mkdir(parents=True, exist_ok=True)
        self._write_local_settings()
        for path, value in (
            (self._secret_file, secrets.token_urlsafe(32)),
            (self.password_file, json.dumps({ADMIN_USER: secrets.token_urlsafe(12)})),
        ):
            if not path.exists():
                path.write_text(value + "\n")
                path.chmod(0o600)
        if not self._prepared_stamp.exists():
            env = {**os.environ, **self.environment()}
            for args in SETUP_COMMANDS:
                run_airflow(args, env, str(self.home))
            self._prepared_stamp.touch()
        return self

    def before_scheduler(self) -> list[str]:
        """:func:`before_scheduler_starts` on this home's database (in Airflow's environment);
        what it changed, a line each. Only when :meth:`left_unsettled` (Airflow's imports cost
        seconds of every lab's start, with nothing to settle on most)."""
        if not self.left_unsettled():
            return []
        output = _run(
            [sys.executable, "-m", "eoslab.runtime.airflow", "before-scheduler"],
            "python -m eoslab.runtime.airflow before-scheduler",
            {**os.environ, **self.environment()},
            str(self.home),
        )
        return [
            line.removeprefix(CHANGED) for line in output.splitlines() if line.startswith(CHANGED)
        ]

    def left_unsettled(self) -> bool:
        """Whether the database holds what :func:`before_scheduler_starts` settles (a DAG run
        queued or running, a next run due in the past), read with SQLite alone; True when it
        cannot tell (its schema not Airflow's as read here)."""
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")  # as Airflow stores a time
        try:
            with closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)) as db:
                (unfinished,) = db.execute(
                    "SELECT count(*) FROM dag_run WHERE state IN ('queued', 'running')"
                ).fetchone()
                (missed,) = db.execute(
                    "SELECT count(*) FROM dag WHERE next_dagrun_create_after < ?", (now,)
                ).fetchone()
        except sqlite3.Error:
            return True
        return bool(unfinished or missed)

    def _write_local_settings(self) -> None:
        """:data:`LOCAL_SETTINGS` in place, replaced whole when it differs (another Airflow
        process may be importing it that moment)."""
        path = self.home / "config" / "airflow_local_settings.py"
        if path.is_file() and path.read_text() == LOCAL_SETTINGS:
            return
        path.parent.mkdir(exist_ok=True)
        written = path.with_name(f".{path.name}.{os.getpid()}")
        written.write_text(LOCAL_SETTINGS)
        written.replace(path)

    def login_banner(self) -> str:
        """How to log in: the password itself the first time it is shown, then where it is."""
        if self._shown_stamp.exists():
            return f"Airflow: {self.url}  user {ADMIN_USER}, password in {self.password_file}"
        self._shown_stamp.touch()
        return (
            f"Airflow: {self.url}  user {ADMIN_USER}  password {self.password()}"
            f"  (shown once; kept in {self.password_file})"
        )


def before_scheduler_starts() -> list[str]:
    """What the lab's scheduler must not take up when it starts (the lab's last life ended
    without it), settled in the database this process's environment names; what it changed, a
    line each:

    - a DAG run queued or running is one the lab's last life left unfinished (its tasks'
      processes died with the lab): marked failed as Airflow's API marks one (its running tasks
      failed, its pending ones skipped), or the scheduler would run it again ahead of what is
      asked now — a begun nightly, the full matrix, holding every lane for hours. Its cells
      that ran keep their folders; the UI shows it failed.
    - a schedule whose next run fell while the lab was down (the nightly's midnight, computed
      when the lab last ran) moves to its next time from now: the scheduler would create the
      missed run at once, beside the `make lab` that brought the lab up (a run a lab is down
      for is not run late, as Airflow's catch-up off does for the runs before the latest).
    """
    from airflow.api.common.mark_tasks import set_dag_run_state_to_failed
    from airflow.models.dag import DagModel
    from airflow.models.dagbag import DBDagBag
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import select

    done = []
    dags = DBDagBag()
    with create_session() as session:
        unfinished = select(DagRun).where(
            DagRun.state.in_((DagRunState.QUEUED, DagRunState.RUNNING))
        )
        for run in session.scalars(unfinished).all():
            dag = dags.get_dag_for_run(run, session=session)
            if dag is None:  # its DAG gone from the database: the run alone
                run.set_state(DagRunState.FAILED)
            else:
                set_dag_run_state_to_failed(
                    dag=dag, run_id=run.run_id, commit=True, session=session
                )
            done.append(f"{run.dag_id} {run.run_id}: left unfinished, marked failed")
        missed = select(DagModel).where(DagModel.next_dagrun_create_after < datetime.now(UTC))
        for model in session.scalars(missed).all():
            dag = dags.get_latest_version_of_dag(model.dag_id, session=session)
            if dag is None:
                continue
            was = model.next_dagrun_create_after
            model.calculate_dagrun_date_fields(dag, reference_run=None)
            done.append(
                f"{model.dag_id}: its run due {was:%Y-%m-%dT%H:%M}Z missed while the lab was down, "
                f"next {model.next_dagrun_create_after:%Y-%m-%dT%H:%M}Z"
            )
    return done


def main(argv: list[str] | None = None) -> int:
    """``python -m eoslab.runtime.airflow setup``: set up the Airflow database this process's
    environment names (the compose runtime's ``airflow-init`` service); ``before-scheduler``:
    :func:`before_scheduler_starts`, what it changed printed a line each."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("step", choices=["setup", "before-scheduler"])
    step = parser.parse_args(argv).step
    if step == "before-scheduler":
        for change in before_scheduler_starts():
            print(f"{CHANGED}{change}")
        return 0
    where = os.environ.get("AIRFLOW_HOME", "the default Airflow home")
    try:
        for args in SETUP_COMMANDS:
            run_airflow(args, os.environ, where)
    except AirflowSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
