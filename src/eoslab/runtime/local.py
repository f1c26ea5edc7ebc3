"""The default runtime: the lab as local processes, supervised through a state file.

`up` starts every service in its own process group and records pid, start time and command
in `<state_dir>/state.json`, with the lab's targets; later commands (status, kill, down, ...)
act on those records, so the lab outlives the command that started it.

Kafka 4's nodes are formatted before their first start (`kafka-storage format`: the lab's
one cluster id, the static quorum of the three nodes), all at once; a node whose data folder is
formatted already keeps it.

The lab's nodes (ZooKeeper, the brokers, the reference broker, the proxy) each start in a cgroup
of their own when the lab runs as root, so that the nemesis can cut the links between them
(:mod:`eoslab.runtime.netfaults`); `down` removes every cut of the lab, and `up` any a nemesis
that died mid-partition left behind (its status lists them).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path

from eoslab.admin import metadata_brokers, metadata_quorum
from eoslab.clock import wait_until
from eoslab.console import log_tail
from eoslab.runtime import configs, health, processes
from eoslab.runtime.airflow import AirflowHome, AirflowSetupError, venv_bin
from eoslab.runtime.lab import ProcessObservation, ProcessState
from eoslab.runtime.netfaults import LabNetwork
from eoslab.runtime.postgres import PostgresError, PostgresServer
from eoslab.runtime.processes import ProcessRecord
from eoslab.runtime.spark import connect_server_command, spark_environment
from eoslab.runtime.status import LabError, LabStatus, ServiceStatus, cluster_view
from eoslab.runtime.topology import (
    HOST,
    STATE_FILE,
    Kind,
    LabConfig,
    Service,
    running_lab_config,
)
from eoslab.runtime.zookeeper import registered_brokers
from eoslab.settings import TARGETS, BasePort, kafka4_lib, kafka_lib

JVM_COMMON = ["-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]
QUICK_JVM = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
"""A lab JVM that starts and idles cheaply (``LabConfig.quick_jvms``): C1's code only, which is
quick to compile, and one thread collecting a heap of 512 MB. Measured on two cores (a lab of
Kafka 3.9 and Kafka 4, 2026-11-29): Kafka 4's three nodes took 51 s of CPU to start, 27 s with
these; Kafka 3.9's three brokers 27 s, 15 s; a minute idle 24.5 s and 7.8 s, 19.8 s and 6.4 s.
A lab test run of eight catalogue cells had spent half the machine's CPU in the brokers."""
SIGNAL_SETTLE_S = 5.0
"""How long SIGSTOP/SIGCONT may take to show in the process' state."""
LOG_SERVERS = {"scheduler", "triggerer"}
"""Airflow components that would open a log server on every interface unless told not to."""
FORMAT_TIMEOUT_S = 120.0
"""Bound on `kafka-storage format` (a JVM start, a few seconds)."""


def new_cluster_id() -> str:
    """A KRaft cluster id as Kafka's ``Uuid.randomUuid()`` makes one (what ``kafka-storage
    random-uuid`` prints): 16 random bytes in URL-safe base64 without padding, never starting
    with a dash."""
    while True:
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class LocalRuntime:
    name = "local"

    def __init__(self, config: LabConfig | None = None) -> None:
        self.config = running_lab_config() if config is None else config
        self.state_file = self.config.state_dir / STATE_FILE

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
            "targets": list(self.config.targets),
            "services": {name: record.to_json() for name, record in records.items()},
        }
        tmp = self.state_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload, indent=2))
        tmp.replace(self.state_file)

    @contextmanager
    def _changing(self) -> Iterator[dict[str, ProcessRecord]]:
        """The lab's records, to change in the block and saved after it, one process at a time:
        the lanes' nemeses restart services of different targets side by side, and two such
        read-change-saves at once lost one's change (`make conformance`, 2026-12-07: a Kafka
        broker restarted, its record overwritten by another lane's, the lab took it for
        stopped; the next pause fault failed on it and left another broker paused)."""
        self.config.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.config.state_dir / "state.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # let go when the file closes
            records = self._records()
            yield records
            self._save(records)

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
        if service.kind in (Kind.KAFKA, Kind.KAFKA4):
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

    def _java(self, service: Service, main: str, heap: str, *args: str | Path) -> list[str]:
        """A JVM of the Kafka jars: Kafka 4's (log4j 2) for a Kafka 4 node, else Kafka 3.9's
        (reload4j; ZooKeeper comes with them)."""
        java = shutil.which("java")
        if java is None:
            raise LabError(
                "java not found on PATH; install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
            )
        if service.kind is Kind.KAFKA4:
            logging = f"-Dlog4j2.configurationFile={configs.kafka4_log4j2_properties()}"
            lib = kafka4_lib()
        else:
            logging = f"-Dlog4j.configuration=file:{configs.log4j_properties()}"
            lib = kafka_lib()
        return [
            java,
            f"-Xmx{heap}",
            f"-Xms{heap}",
            *JVM_COMMON,
            *(QUICK_JVM if self.config.quick_jvms else []),
            logging,
            f"-Dkafka.logs.dir={self.config.state_dir / service.name / 'logs'}",
            "-cp",
            f"{lib}/*",
            main,
            *map(str, args),
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
                if service.component == "scheduler":
                    self._settle_before_scheduler(service)
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
        elif service.kind is Kind.KAFKA4:
            (root / "server.properties").write_text(configs.kafka4_properties(self.config, service))

    def fault_log_path(self) -> Path:
        """Where the chaos proxy logs every fault it injects."""
        return self.config.state_dir / "proxy" / "faults.jsonl"

    def log_path(self, name: str) -> Path:
        return self.config.state_dir / "logs" / f"{name}.log"

    def _settle_before_scheduler(self, scheduler: Service) -> None:
        """Before the scheduler starts: what the lab's last life left it, settled
        (:func:`eoslab.runtime.airflow.before_scheduler_starts`), each change named in the
        scheduler's log."""
        changes = self.airflow().before_scheduler()
        if changes:
            log = self.log_path(scheduler.name)
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as out:
                out.writelines(f"=== eoslab, before the scheduler: {line}\n" for line in changes)

    def _start(self, service: Service) -> ProcessRecord:
        self._write_config(service)
        env = {
            Kind.AIRFLOW: self.airflow().environment,
            Kind.SPARK_CONNECT: spark_environment,
        }.get(service.kind, dict)()
        return processes.spawn(
            service.name,
            self.network().enter(service, self.argv(service)),
            self.log_path(service.name),
            self.config.state_dir,
            env={"PYTHONUNBUFFERED": "1", TARGETS: ",".join(self.config.targets), **env},
            user=self.postgres().run_as if service.kind is Kind.POSTGRES else None,
        )

    # ---------------------------------------------------------------- up / down
    def _preflight(self) -> None:
        kinds = {service.kind for service in self.config.services()}
        needed = {
            kafka_lib(): bool({Kind.ZOOKEEPER, Kind.KAFKA} & kinds),
            kafka4_lib(): Kind.KAFKA4 in kinds,
        }
        for lib in (lib for lib, needs in needed.items() if needs):
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

    def network(self) -> LabNetwork:
        """The links between the lab's nodes, and what of them is cut."""
        return LabNetwork(self.config)

    def up(self) -> LabStatus:
        self._preflight()
        stale = self.network().clear()
        records: dict[str, ProcessRecord] = {}
        try:
            self._format_kafka4()
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
        return replace(self.status(), removed_cuts=[str(cut) for cut in stale])

    def _format_kafka4(self) -> None:
        """`kafka-storage format` every Kafka 4 node not formatted yet, all at once, with the
        lab's cluster id (made on the first format, kept in the state folder)."""
        nodes = [
            s
            for s in self.config.services()
            if s.kind is Kind.KAFKA4
            and not (self.config.state_dir / s.name / "data" / "meta.properties").exists()
        ]
        if not nodes:
            return
        id_file = self.config.state_dir / "kafka4-cluster-id"
        if not id_file.exists():
            self.config.state_dir.mkdir(parents=True, exist_ok=True)
            id_file.write_text(new_cluster_id() + "\n")
        cluster_id = id_file.read_text().strip()
        running = []
        for node in nodes:
            self._write_config(node)
            argv = self._java(
                node,
                "kafka.tools.StorageTool",
                "256m",
                "format",
                "--cluster-id",
                cluster_id,
                "--config",
                self.config.state_dir / node.name / "server.properties",
            )
            log = self.log_path(node.name)
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("ab") as out:
                out.write(f"\n=== eoslab: formatting {node.name}: {' '.join(argv)}\n".encode())
                out.flush()
                running.append((node, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)))
        for node, process in running:
            try:
                code = process.wait(timeout=FORMAT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                code = None
            if code != 0:
                raise self._failure(
                    node.name, f"could not be formatted (kafka-storage format: exit {code})"
                )

    def _await(self, service: Service, condition: Callable[[], bool]) -> None:
        record = self._records()[service.name]

        def ready() -> bool:
            if not record.alive():
                raise self._failure(service.name, "exited during start-up")
            return condition()

        if not wait_until(ready, self.config.up_timeout_s):
            raise self._failure(service.name, f"not healthy after {self.config.up_timeout_s:.0f} s")

    def _await_cluster(self) -> None:
        """Every Kafka 3.9 broker registered in ZooKeeper and in metadata; every Kafka 4 node
        registered with the controller (unfenced: in metadata) and a metadata quorum of the
        three with a leader."""
        brokers, nodes = set(self.config.broker_ids), set(self.config.kafka4_node_ids)
        checks: list[tuple[str, Callable[[], bool]]] = []
        if brokers:
            checks += [
                (
                    f"Kafka brokers {sorted(brokers)} not all registered in ZooKeeper",
                    lambda: registered_brokers(self.config.zookeeper_connect) == brokers,
                ),
                (
                    f"Kafka brokers {sorted(brokers)} not all visible in metadata",
                    lambda: metadata_brokers(self.config.bootstrap_servers) == brokers,
                ),
            ]
        if nodes:
            checks += [
                (
                    f"Kafka 4 nodes {sorted(nodes)} not all registered (in metadata)",
                    lambda: metadata_brokers(self.config.kafka4_bootstrap) == nodes,
                ),
                (
                    f"Kafka 4's metadata quorum of {sorted(nodes)} without a leader",
                    lambda: self._quorum_led(nodes),
                ),
            ]
        for what, condition in checks:
            if not wait_until(condition, self.config.up_timeout_s, interval_s=0.5):
                raise LabError(
                    f"{what} after {self.config.up_timeout_s:.0f} s; "
                    f"logs: {self.log_path('proxy').parent}"
                )

    def _quorum_led(self, voters: set[int]) -> bool:
        quorum = metadata_quorum(self.config.kafka4_bootstrap)
        return quorum is not None and quorum.voters == voters and quorum.leader_id in voters

    def _failure(self, name: str, what: str) -> LabError:
        return LabError(
            f"{name} {what}; last lines of {self.log_path(name)}:\n{self.logs(name, 25)}"
        )

    def down(self, purge: bool = False) -> None:
        """Heal every cut link, stop everything (brokers together, ZooKeeper last) and leave no
        process behind."""
        network = self.network()
        network.clear()
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
        network.remove_cgroups()
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
        timeout_s = 5.0 if any_running else 0.5
        clusters = {
            target: cluster_view(
                self.config.bootstrap(target), timeout_s=timeout_s, kraft=target == "kafka4"
            )
            for target in self.config.targets
        }
        cuts = [str(cut) for cut in self.network().active()]
        return LabStatus(self.name, str(self.config.state_dir), services, clusters, cuts=cuts)

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

    def add(self, names: Iterable[str]) -> None:
        """Start services of this config that the running lab was brought up without (its
        Airflow, say, with this config's ``with_airflow``), and wait until they are healthy."""
        services = [self.config.service(name) for name in names]
        for service in services:
            with self._changing() as records:
                if service.name in records:
                    raise LabError(f"{service.name} runs already in {self.config.state_dir}")
                records[service.name] = self._start(service)
        for service in services:
            self._await(service, partial(self._healthy, service))

    def remove(self, names: Iterable[str]) -> None:
        """Stop services that :meth:`add` started, leaving the rest of the lab running."""
        for name in names:
            with self._changing() as records:
                processes.stop(records.pop(name), self.config.stop_grace_s)

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
        with self._changing() as records:
            records[name] = self._start(service)
        self._await(service, lambda: self._healthy(service))
        if service.kind is Kind.KAFKA:
            wait_until(
                lambda: service.broker_id in registered_brokers(self.config.zookeeper_connect),
                timeout_s=self.config.up_timeout_s,
                interval_s=0.5,
            )
        elif service.kind is Kind.KAFKA4:
            # Registered again with the active controller (a killed node's old registration is
            # refused until its session expires) and unfenced: in metadata.
            wait_until(
                lambda: service.broker_id in metadata_brokers(self.config.kafka4_bootstrap),
                timeout_s=self.config.up_timeout_s,
                interval_s=0.5,
            )

    def wait_healthy(self, names: Iterable[str], timeout_s: float) -> bool:
        services = [self.config.service(n) for n in names]
        return bool(wait_until(lambda: all(self._healthy(s) for s in services), timeout_s))
