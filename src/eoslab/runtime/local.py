"""The default runtime: the lab as local processes, supervised through a state file.

`up` starts every service in its own process group and records pid, start time and command
in `<state_dir>/state.json`; later commands (status, kill, down, ...) act on those records,
so the lab outlives the command that started it.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from eoslab.admin import metadata_brokers
from eoslab.clock import wait_until
from eoslab.console import log_tail
from eoslab.runtime import configs, health, processes
from eoslab.runtime.airflow import AirflowHome, AirflowSetupError, venv_bin
from eoslab.runtime.lab import ProcessObservation, ProcessState
from eoslab.runtime.postgres import PostgresError, PostgresServer
from eoslab.runtime.processes import ProcessRecord
from eoslab.runtime.spark import connect_server_command, spark_environment
from eoslab.runtime.status import LabError, LabStatus, ServiceStatus, cluster_view
from eoslab.runtime.topology import HOST, Kind, LabConfig, Service
from eoslab.runtime.zookeeper import registered_brokers
from eoslab.settings import BasePort, kafka_lib

JVM_COMMON = ["-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]
SIGNAL_SETTLE_S = 5.0
"""How long SIGSTOP/SIGCONT may take to show in the process' state."""
LOG_SERVERS = {"scheduler", "triggerer"}
"""Airflow components that would open a log server on every interface unless told not to."""


class LocalRuntime:
    name = "local"

    def __init__(self, config: LabConfig | None = None) -> None:
        self.config = config or LabConfig()
        self.state_file = self.config.state_dir / "state.json"

    # ---------------------------------------------------------------- state file
    def _records(self) -> dict[str, ProcessRecord]:
        if not self.state_file.exists():
            return {}
        try:
            raw = json.loads(self.state_file.read_text())
            return {name: ProcessRecord(**record) for name, record in raw["services"].items()}
        except (ValueError, KeyError, TypeError) as error:
            raise LabError(
                f"the lab state file {self.state_file} is unreadable ({error}); "
                f"stop stray processes with `eoslab lab down`, or wipe it with `eoslab lab down --purge`"
            ) from error

    def _save(self, records: dict[str, ProcessRecord]) -> None:
        self.config.state_dir.mkdir(parents=True, exist_ok=True)
        payload = {
            "runtime": self.name,
            "port_offset": self.config.port_offset,
            "services": {name: record.to_json() for name, record in records.items()},
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=2))
        tmp.replace(self.state_file)

    def _record(self, name: str) -> ProcessRecord:
        self.config.service(name)  # unknown names get the list of services
        record = self._records().get(name)
        if record is None:
            raise LabError(f"{name} has not been started; run `eoslab lab up` first")
        return record

    # ---------------------------------------------------------------- commands
    def argv(self, service: Service) -> list[str]:
        """The command line of a service."""
        root = self.config.state_dir / service.name
        lab_python = [sys.executable, "-m"]
        if service.kind is Kind.ZOOKEEPER:
            return self._java(
                service,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                self.config.zookeeper_heap,
                root / "zookeeper.properties",
            )
        if service.kind is Kind.KAFKA:
            return self._java(
                service, "kafka.Kafka", self.config.broker_heap, root / "server.properties"
            )
        if service.kind is Kind.AIRFLOW:
            no_log_server = ["--skip-serve-logs"] if service.component in LOG_SERVERS else []
            return [str(venv_bin() / "airflow"), str(service.component), *no_log_server]
        if service.kind is Kind.POSTGRES:
            return self.postgres().command()
        if service.kind is Kind.SPARK_CONNECT:
            return connect_server_command(service.ports["grpc"], local_dir=root / "tmp")
        if service.kind is Kind.PROXY:
            routes = [
                f"--route={name}={HOST}:{listen}={HOST}:{upstream}"
                for name, listen, upstream in self.config.proxy_routes()
            ]
            return [
                *lab_python,
                "eoslab.proxy",
                *routes,
                f"--control={HOST}:{service.ports['control']}",
                f"--fault-log={self.fault_log_path()}",
            ]
        return [
            *lab_python,
            "eoslab.refbroker",
            "serve",
            f"--listen={HOST}:{service.ports['client']}",
            f"--advertised={HOST}:{service.ports['advertised']}",
            f"--control={HOST}:{service.ports['control']}",
            f"--data-dir={root / 'data'}",
            f"--zookeeper={self.config.zookeeper_connect}",
            # as services/kafka/server.properties sets for the lab's Kafka brokers
            "--group-initial-rebalance-delay-ms=0",
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms=1000",
        ]

    def _java(self, service: Service, main: str, heap: str, conf: Path) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise LabError(
                "java not found on PATH; install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
            )
        return [
            java,
            f"-Xmx{heap}",
            f"-Xms{heap}",
            *JVM_COMMON,
            f"-Dlog4j.configuration=file:{configs.log4j_properties()}",
            f"-Dkafka.logs.dir={self.config.state_dir / service.name / 'logs'}",
            "-cp",
            f"{kafka_lib()}/*",
            main,
            str(conf),
        ]

    def airflow(self) -> AirflowHome:
        """The lab's Airflow home (prepared by `up` when the lab has Airflow)."""
        return AirflowHome(
            home=self.config.airflow_home,
            api_port=self.config.port(BasePort.AIRFLOW),
            lab_dir=self.config.state_dir,
            port_offset=self.config.port_offset,
            spark_connect_port=(
                self.config.spark_connect_port if self.config.with_spark_connect else None
            ),
        )

    def postgres(self) -> PostgresServer:
        """The lab's PostgreSQL for the consumers' sinks (its cluster, password, log)."""
        return PostgresServer(self.config.postgres_root, self.config.port(BasePort.POSTGRES))

    def _write_config(self, service: Service) -> None:
        if service.kind is Kind.POSTGRES:
            # the server's user (nobody, under root) walks through the lab's folder to its own
            state = self.config.state_dir
            state.mkdir(parents=True, exist_ok=True)
            state.chmod(state.stat().st_mode | 0o011)
            try:
                self.postgres().init()
            except PostgresError as error:
                raise LabError(str(error)) from error
            return
        if service.kind is Kind.AIRFLOW:
            try:
                self.airflow().prepare()
            except AirflowSetupError as error:
                raise LabError(str(error)) from error
            return
        root = self.config.state_dir / service.name
        if service.kind is Kind.SPARK_CONNECT:
            (root / "tmp").mkdir(parents=True, exist_ok=True)
            return
        (root / "data").mkdir(parents=True, exist_ok=True)
        if service.kind is Kind.ZOOKEEPER:
            (root / "zookeeper.properties").write_text(
                configs.zookeeper_properties(self.config, service)
            )
        elif service.kind is Kind.KAFKA:
            (root / "server.properties").write_text(configs.kafka_properties(self.config, service))

    def fault_log_path(self) -> Path:
        """Where the chaos proxy logs every fault it injects."""
        return self.config.state_dir / "proxy" / "faults.jsonl"

    def log_path(self, name: str) -> Path:
        return self.config.state_dir / "logs" / f"{name}.log"

    def _start(self, service: Service) -> ProcessRecord:
        self._write_config(service)
        env = {
            Kind.AIRFLOW: self.airflow().environment,
            Kind.SPARK_CONNECT: spark_environment,
        }.get(service.kind, dict)()
        return processes.spawn(
            service.name,
            self.argv(service),
            self.log_path(service.name),
            self.config.state_dir,
            env={"PYTHONUNBUFFERED": "1", **env},
            user=self.postgres().run_as if service.kind is Kind.POSTGRES else None,
        )

    # ---------------------------------------------------------------- up / down
    def _preflight(self) -> None:
        lib = kafka_lib()
        if not (lib / ".fetched").exists():
            raise LabError(f"the Kafka jars are missing in {lib}; run `make setup`")
        records = self._records()
        running = [name for name, record in records.items() if record.alive()]
        if running:
            raise LabError(
                f"the lab in {self.config.state_dir} is already running ({', '.join(running)}); "
                "see `eoslab lab status`, or stop it with `eoslab lab down`"
            )
        if records:
            raise LabError(
                f"stale state in {self.config.state_dir}: a previous lab did not stop cleanly "
                "(its processes are gone); run `eoslab lab down` to clear it "
                "(add --purge to wipe its data as well)"
            )
        strays = processes.processes_of(self.config.state_dir)
        if strays:
            pids = ", ".join(str(p.pid) for p in strays)
            raise LabError(
                f"processes of this lab are still running (pids {pids}); run `eoslab lab down`"
            )
        busy = [
            f"{service.name}:{port}"
            for service in self.config.services()
            for port in service.ports.values()
            if not health.port_free(port)
        ]
        if busy:
            raise LabError(
                f"port(s) already in use on {HOST}: {', '.join(busy)}. Another lab or program holds "
                "them: stop it, or move this lab with EOSLAB_PORT_OFFSET=<n>"
            )

    def up(self) -> LabStatus:
        self._preflight()
        records: dict[str, ProcessRecord] = {}
        try:
            for service in self.config.services():
                records[service.name] = self._start(service)
                self._save(records)
                if service.kind is Kind.ZOOKEEPER:
                    self._await(service, partial(health.zookeeper_ok, service.ports["client"]))
            for service in self.config.services():
                self._await(service, partial(self._healthy, service))
            self._await_cluster()
        except LabError:
            for record in reversed(records.values()):
                processes.stop(record, grace_s=5.0)
            self.state_file.unlink(missing_ok=True)
            raise
        return self.status()

    def _await(self, service: Service, condition: Callable[[], bool]) -> None:
        record = self._records()[service.name]

        def ready() -> bool:
            if not record.alive():
                raise self._failure(service.name, "exited during start-up")
            return condition()

        if not wait_until(ready, self.config.up_timeout_s):
            raise self._failure(service.name, f"not healthy after {self.config.up_timeout_s:.0f} s")

    def _await_cluster(self) -> None:
        expected = set(self.config.broker_ids)
        if not expected:
            return

        def registered() -> bool:
            return registered_brokers(self.config.zookeeper_connect) == expected

        def visible() -> bool:
            return metadata_brokers(self.config.bootstrap_servers) == expected

        for what, condition in (
            ("registered in ZooKeeper", registered),
            ("visible in metadata", visible),
        ):
            if not wait_until(condition, self.config.up_timeout_s, interval_s=0.5):
                raise LabError(
                    f"brokers {sorted(expected)} not all {what} after {self.config.up_timeout_s:.0f} s; "
                    f"logs: {self.log_path('kafka-1').parent}"
                )

    def _failure(self, name: str, what: str) -> LabError:
        return LabError(
            f"{name} {what}; last lines of {self.log_path(name)}:\n{self.logs(name, 25)}"
        )

    def down(self, purge: bool = False) -> None:
        """Stop everything (brokers together, ZooKeeper last) and leave no process behind."""
        kinds = {s.name: s.kind for s in self.config.services()}
        zookeeper_last = sorted(
            self._records().values(), key=lambda r: kinds.get(r.name) is Kind.ZOOKEEPER
        )
        for record in zookeeper_last:
            if kinds.get(record.name) is not Kind.ZOOKEEPER:
                processes.terminate(record)  # all brokers shut down in parallel
        for record in zookeeper_last:
            processes.stop(record, self.config.stop_grace_s)
        for stray in processes.processes_of(self.config.state_dir):
            stray.kill()
        self.state_file.unlink(missing_ok=True)
        if purge and self.config.state_dir.exists():
            shutil.rmtree(self.config.state_dir)

    # ---------------------------------------------------------------- status
    def _healthy(self, service: Service) -> bool:
        if service.kind is Kind.ZOOKEEPER:
            return health.zookeeper_ok(service.ports["client"])
        if service.kind is Kind.PROXY:
            return all(health.port_open(port) for _, port, _ in self.config.proxy_routes())
        if service.kind is Kind.POSTGRES:
            return self.postgres().accepts_login()
        return all(
            health.port_open(port) for label, port in service.ports.items() if label != "advertised"
        )

    def status(self) -> LabStatus:
        records = self._records()
        services = []
        for service in self.config.services():
            record = records.get(service.name)
            live = record if record is not None and record.alive() else None
            state = "stopped" if live is None else "paused" if live.paused() else "running"
            services.append(
                ServiceStatus(
                    name=service.name,
                    kind=service.kind.value,
                    state=state,
                    healthy=state == "running" and self._healthy(service),
                    pid=None if live is None else live.pid,
                    ports=service.ports,
                    log=str(self.log_path(service.name)),
                )
            )
        any_running = any(s.state != "stopped" for s in services)
        kafka = cluster_view(self.config.bootstrap_servers, timeout_s=5.0 if any_running else 0.5)
        refbroker = (
            cluster_view(self.config.refbroker_bootstrap, timeout_s=5.0 if any_running else 0.5)
            if self.config.with_refbroker
            else None
        )
        return LabStatus(self.name, str(self.config.state_dir), services, kafka, refbroker)

    def logs(self, name: str, lines: int = 50) -> str:
        self.config.service(name)
        return log_tail(self.log_path(name), lines)

    # ---------------------------------------------------------------- nemesis verbs
    def observe(self, name: str) -> ProcessObservation:
        record = self._record(name)
        if record.process() is None:
            return ProcessObservation(None, ProcessState.DEAD)
        state = ProcessState.STOPPED if record.paused() else ProcessState.RUNNING
        return ProcessObservation(record.pid, state)

    def kill(self, name: str) -> None:
        """kill -9: the process dies without shutdown."""
        processes.kill(self._record(name))

    def pause(self, name: str) -> None:
        """SIGSTOP: the process freezes, its sockets stay open (a GC pause, a stalled VM).
        Returns once the kernel shows it stopped (bounded: a signal is delivered, not done)."""
        record = self._record(name)
        if not processes.signal_group(record, signal.SIGSTOP):
            raise LabError(f"{name} is not running")
        wait_until(record.paused, SIGNAL_SETTLE_S, interval_s=0.01)

    def resume(self, name: str) -> None:
        record = self._record(name)
        if not processes.signal_group(record, signal.SIGCONT):
            raise LabError(f"{name} is not running")
        wait_until(lambda: not record.paused(), SIGNAL_SETTLE_S, interval_s=0.01)

    def restart(self, name: str) -> None:
        """Stop (gracefully when it runs) and start again with the same config and data."""
        service = self.config.service(name)
        record = self._record(name)
        processes.stop(record, self.config.stop_grace_s)
        if service.kind is Kind.KAFKA:
            # The dead broker's ephemeral registration must expire before it can register again.
            wait_until(
                lambda: service.broker_id not in registered_brokers(self.config.zookeeper_connect),
                timeout_s=30.0,
                interval_s=0.5,
            )
        records = self._records()
        records[name] = self._start(service)
        self._save(records)
        self._await(service, lambda: self._healthy(service))
        if service.kind is Kind.KAFKA:
            wait_until(
                lambda: service.broker_id in registered_brokers(self.config.zookeeper_connect),
                timeout_s=self.config.up_timeout_s,
                interval_s=0.5,
            )

    def wait_healthy(self, names: Iterable[str], timeout_s: float) -> bool:
        services = [self.config.service(n) for n in names]
        return bool(wait_until(lambda: all(self._healthy(s) for s in services), timeout_s))
