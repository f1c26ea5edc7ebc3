"""Network faults between the lab's own processes, on loopback: cut links, one way or both.

Every link the lab can cut joins two of its processes: a Kafka broker and another one's
inter-broker listener (replication, the controller's requests), a broker and ZooKeeper, a
Kafka 4 node and another one's controller listener (the Raft quorum: Vote, Fetch,
BeginQuorumEpoch, the brokers' heartbeats), the reference broker and ZooKeeper (its PID blocks),
and the chaos proxy (the clients' side) and a node's client listener.

**How** (measured against the other candidates: README, "Partitions"). Each of these processes
runs in a cgroup (v2) of its own, ``eoslab-<port offset>/<service>``, which it enters before it
execs (:meth:`LabNetwork.enter`): every socket it ever opens belongs to that cgroup. A cut link
``a -> b`` is one iptables rule in the lab's own chain ``EOSLAB-<port offset>`` (jumped to from
OUTPUT for ``-o lo``): TCP packets that ``a``'s sockets send to ``b``'s listener ports are
dropped (``-m cgroup --path``, ``-m multiport --dports``). Only the lab's own processes match: a
root process (the nemesis, the tests, the proxy when it is not named), another lab's (other
cgroups: another offset) never. Nothing is dropped on the way back: the link is cut for what
``a`` sends on the connections it opens to ``b`` (requests, and its acknowledgements of what
``b`` answers), so a one-way cut ``a -> b`` leaves ``b`` reaching ``a`` (TCP cannot carry a
connection whose packets flow one way only: one-way is per connection, who calls whom).

Packets are dropped silently (no reset), as a real partition drops them: TCP retries until the
peers' own timeouts notice. A link can also be made lossy (a fraction of its packets dropped at
random: ``-m statistic``, :class:`Loss`) or slow (its packets queued to a program that holds
each for a delay, ``-j NFQUEUE --queue-bypass``: :mod:`eoslab.runtime.linkdelay`, :class:`Hold`;
if that program is gone, the kernel lets the packets through). Without root (iptables,
cgroups) nothing is cut: :meth:`LabNetwork.unavailable` says why and the nemesis refuses the
steps with that message.

Cuts are healed by whoever made them (a step's end, the run's end) and, whatever happened to
that process, by ``lab down`` and the next ``lab up`` of the same lab (:meth:`LabNetwork.clear`),
which both say what they removed; ``lab status`` lists what is cut (:meth:`LabNetwork.active`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from eoslab.clock import wait_until
from eoslab.runtime.topology import Kind, LabConfig, Service

PROXY = "proxy"
"""The chaos proxy: the clients' end of a link to a node's client listener."""
NODE_KINDS = (Kind.ZOOKEEPER, Kind.KAFKA, Kind.KAFKA4, Kind.REFBROKER, Kind.PROXY)
"""The services that run in a cgroup of their own: the ends of the links the lab can cut."""
INTER_NODE_PORTS = ("internal", "controller")
"""A Kafka node's listeners that other nodes reach: replication and the controller's requests
(Kafka 3.9), and the Raft quorum (Kafka 4's controller listener)."""
EMPTY_TIMEOUT_S = 5.0
"""How long ``lab down`` waits for a node's cgroup to empty after its process exited."""
IPTABLES_TIMEOUT_S = 30.0
IPTABLES_WAIT_S = "10"
"""How long iptables waits for the machine-wide xtables lock (other labs edit their chains)."""


@runtime_checkable
class Partitionable(Protocol):
    """A runtime whose nodes' links can be cut (the local one)."""

    def network(self) -> LabNetwork:
        """The links between the lab's nodes, and what of them is cut."""
        ...


class NetworkFaultError(RuntimeError):
    """A cut could not be made, listed or removed; the message says why."""


@dataclass(frozen=True)
class Link:
    """What ``source`` sends on the connections it opens to ``dest``'s listeners."""

    source: str
    dest: str

    def __str__(self) -> str:
        return f"{self.source}->{self.dest}"

    @classmethod
    def parse(cls, text: str) -> Link:
        source, _, dest = text.partition("->")
        return cls(source, dest)


@dataclass(frozen=True)
class Drop:
    """A cut link: every packet dropped."""

    def target(self) -> list[str]:
        return ["-j", "DROP"]


@dataclass(frozen=True)
class Loss:
    """A lossy link: each packet dropped with ``probability``."""

    probability: float

    def target(self) -> list[str]:
        probability = f"{self.probability:g}"
        return ["-m", "statistic", "--mode", "random", "--probability", probability, "-j", "DROP"]


@dataclass(frozen=True)
class Hold:
    """A slow link: every packet queued to the program bound to netfilter queue ``queue``,
    which lets it go after a delay (through, unheld, when no program is bound)."""

    queue: int

    def target(self) -> list[str]:
        return ["-j", "NFQUEUE", "--queue-num", str(self.queue), "--queue-bypass"]


Action = Drop | Loss | Hold
DROP = Drop()


@dataclass(frozen=True)
class Cut:
    """One link as the lab's chain holds it cut, lossy or slow: who did it (``tag``), and the
    packets its rule took so far (dropped, or queued to be held)."""

    tag: str
    link: Link
    packets: int
    how: str = "cut"
    """``cut``, ``lossy P`` or ``slow (queue N)``."""

    def __str__(self) -> str:
        taken = "held" if self.how.startswith("slow") else "dropped"
        how = "" if self.how == "cut" else f"{self.how}, "
        return f"{self.link} (by {self.tag}, {how}{self.packets} packets {taken})"


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or ``.../unified`` on a
    hybrid system), or None."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


class LabNetwork:
    """The network faults of one lab (one port offset): its cgroups and its chain."""

    def __init__(self, config: LabConfig) -> None:
        self.config = config
        self.group = f"eoslab-{config.port_offset}"
        """The lab's cgroup, parent of one per node; the name ``-m cgroup --path`` matches."""
        self.chain = f"EOSLAB-{config.port_offset}"
        self._jump = ["OUTPUT", "-o", "lo", "-m", "comment", "--comment", self.group]
        self._jump += ["-j", self.chain]
        self._root = cgroup2_root()

    # ---------------------------------------------------------------- can it?
    def unavailable(self) -> str | None:
        """Why this machine cannot cut the lab's links, or None when it can."""
        if os.geteuid() != 0:
            return (
                "network partitions need root (iptables and cgroups); run the lab and the "
                "scenario as root"
            )
        if shutil.which("iptables") is None or shutil.which("iptables-restore") is None:
            return "network partitions need iptables (apt-get install iptables)"
        if self._root is None:
            return "network partitions need the cgroup v2 hierarchy mounted (none in /proc/mounts)"
        return None

    def nodes(self) -> dict[str, Service]:
        """The lab's services that are ends of links, by name."""
        return {s.name: s for s in self.config.services() if s.kind in NODE_KINDS}

    def ports(self, link: Link) -> list[int]:
        """The listener ports of ``link.dest`` that ``link.source`` connects to: its client
        listener for the proxy, else its inter-node listeners (ZooKeeper's only one); none
        from ZooKeeper, which (standalone) opens no connection to anyone."""
        nodes = self.nodes()
        dest = nodes[link.dest]
        if nodes[link.source].kind is Kind.ZOOKEEPER:
            return []
        if link.source == PROXY:
            return [dest.ports["client"]]
        if dest.kind is Kind.ZOOKEEPER:
            return [dest.ports["client"]]
        return [dest.ports[label] for label in INTER_NODE_PORTS if label in dest.ports]

    # ---------------------------------------------------------------- cgroups
    def cgroup(self, service: str) -> str:
        """The service's cgroup, as ``-m cgroup --path`` names it."""
        return f"{self.group}/{service}"

    def enter(self, service: Service, argv: list[str]) -> list[str]:
        """``argv`` as started in the service's cgroup: a shell that moves itself there, then
        execs it (same pid), so that no socket of the service is ever opened outside. Unchanged
        for a service that is no end of a link, or where cuts are unavailable (not root)."""
        if service.kind not in NODE_KINDS or self.unavailable() is not None:
            return argv
        assert self._root is not None
        folder = self._root / self.cgroup(service.name)
        folder.mkdir(parents=True, exist_ok=True)
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(folder / "cgroup.procs"), *argv]

    def members(self, service: str) -> list[int]:
        """The pids in the service's cgroup now."""
        if self._root is None:
            return []
        try:
            text = (self._root / self.cgroup(service) / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def remove_cgroups(self) -> None:
        """Remove the lab's cgroups that no process is left in (``lab down``)."""
        if self._root is None or not (self._root / self.group).is_dir():
            return
        for folder in (self._root / self.group).iterdir():
            if folder.is_dir():
                _rmdir(folder)
        _rmdir(self._root / self.group)

    # ---------------------------------------------------------------- cuts
    def cut(self, links: list[Link], tag: str, action: Action = DROP) -> None:
        """Cut every link (labelled ``tag``: who cut it), or make it lossy or slow (``action``).
        Refused, nothing cut, when a link's source does not run in its cgroup (a lab brought up
        without root), or a name is not a node of the lab."""
        why = self.unavailable()
        if why is not None:
            raise NetworkFaultError(why)
        if " " in tag or not tag:
            raise NetworkFaultError(f"a cut's tag is one word, not {tag!r}")
        nodes = self.nodes()
        for link in links:
            unknown = [name for name in (link.source, link.dest) if name not in nodes]
            if unknown:
                raise NetworkFaultError(
                    f"{', '.join(unknown)}: not an end of a link in this lab "
                    f"(one of {', '.join(nodes)})"
                )
            if not self.members(link.source):
                raise NetworkFaultError(
                    f"{link.source} does not run in its cgroup {self.cgroup(link.source)}: "
                    "bring the lab down and up again as root"
                )
        if not links:
            return
        if self._rules() is None:
            self._iptables("-N", self.chain)
            self._iptables("-A", *self._jump)
        self._transaction("-A", [self._rule(link, tag, action) for link in links])

    def _transaction(self, action: str, rules: list[list[str]]) -> None:
        """Append (``-A``) or delete (``-D``) rules of the lab's chain in one transaction
        (``iptables-restore``): all of a cut or none, even when the nemesis dies on the way."""
        lines = [
            " ".join([action, self.chain, *(f'"{word}"' if " " in word else word for word in rule)])
            for rule in rules
        ]
        done = subprocess.run(
            ["iptables-restore", "--noflush"],
            input="\n".join(["*filter", *lines, "COMMIT", ""]),
            capture_output=True,
            text=True,
            timeout=IPTABLES_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise NetworkFaultError(f"iptables-restore: {done.stderr.strip() or done.returncode}")

    def _rule(self, link: Link, tag: str, action: Action) -> list[str]:
        ports = ",".join(str(port) for port in self.ports(link))
        return [
            "-p",
            "tcp",
            "-m",
            "cgroup",
            "--path",
            self.cgroup(link.source),
            "-m",
            "multiport",
            "--dports",
            ports,
            "-m",
            "comment",
            "--comment",
            f"{tag} {link}",
            *action.target(),
        ]

    def active(self) -> list[Cut]:
        """Every link of this lab cut now, with what each dropped."""
        return [cut for cut, _ in self._rules() or []]

    def restore(self, tag: str) -> list[Cut]:
        """Remove the cuts labelled ``tag`` (the chain too once it is empty); what they were."""
        rules = self._rules()
        if rules is None:
            return []
        removed = [(cut, spec) for cut, spec in rules if cut.tag == tag]
        if removed:
            self._transaction("-D", [spec for _, spec in removed])
        if len(removed) == len(rules):
            self._drop_chain()
        return [cut for cut, _ in removed]

    def clear(self) -> list[Cut]:
        """Remove every cut of this lab and its chain, whoever made them; what they were
        (``lab down``, and ``lab up`` after a nemesis that died mid-partition)."""
        if self.unavailable() is not None:
            return []
        rules = self._rules()
        if rules is None:
            return []
        self._drop_chain()
        return [cut for cut, _ in rules]

    def _drop_chain(self) -> None:
        self._iptables("-D", *self._jump, check=False)
        self._iptables("-F", self.chain)
        self._iptables("-X", self.chain)

    def _rules(self) -> list[tuple[Cut, list[str]]] | None:
        """The lab's chain, rule by rule (the cut, and its spec as iptables takes it back);
        None when the lab has no chain."""
        if self.unavailable() is not None:
            return None
        listed = self._iptables("-v", "-S", self.chain, check=False)
        if listed.returncode != 0:
            return None
        rules = []
        for line in listed.stdout.splitlines():
            words = shlex.split(line)
            if words[:2] != ["-A", self.chain]:
                continue
            spec, packets = _without_counters(words[2:])
            comment = spec[spec.index("--comment") + 1]
            tag, _, link = comment.partition(" ")
            rules.append((Cut(tag, Link.parse(link), packets, _how(spec)), spec))
        return rules

    def _iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["iptables", "-w", IPTABLES_WAIT_S, *args],
            capture_output=True,
            text=True,
            timeout=IPTABLES_TIMEOUT_S,
            check=False,
        )
        if check and done.returncode != 0:
            raise NetworkFaultError(
                f"iptables {' '.join(args)}: {done.stderr.strip() or done.returncode}"
            )
        return done


def _how(spec: list[str]) -> str:
    """What a rule of the lab's chain does to its link, from its words."""
    if "--queue-num" in spec:
        return f"slow (queue {spec[spec.index('--queue-num') + 1]})"
    if "--probability" in spec:
        return f"lossy {float(spec[spec.index('--probability') + 1]):g}"
    return "cut"


def _without_counters(words: list[str]) -> tuple[list[str], int]:
    """A rule's words without ``-c PACKETS BYTES`` (what ``iptables -v -S`` adds), and the
    packet count."""
    if "-c" not in words:
        return words, 0
    at = words.index("-c")
    return words[:at] + words[at + 3 :], int(words[at + 1])


def _rmdir(folder: Path) -> None:
    """Remove an empty cgroup: once the kernel no longer counts a process in it (it does for a
    moment after the last one exited), within :data:`EMPTY_TIMEOUT_S`; one a process is still
    in, or one gone already, is left."""
    wait_until(lambda: not _populated(folder), EMPTY_TIMEOUT_S, interval_s=0.1)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _populated(folder: Path) -> bool:
    try:
        return "populated 1" in (folder / "cgroup.events").read_text()
    except OSError:
        return False
