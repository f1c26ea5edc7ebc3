"""The compose runtime's images: one Debian base, and on it the lab's images, built from what
`make setup` fetched on the host (the Kafka jars, Spark's connectors, the virtualenv's pinned
dependencies as a wheelhouse) rather than downloading it all again inside a build.

======  ===================================  ======  ==============================================
image   tag                                  on      adds
======  ===================================  ======  ==============================================
debian  eoslab/debian:bookworm               -       debian:bookworm-slim where it can be pulled,
                                                     else Debian's minbase debootstrapped from the
                                                     mirror apt uses here (as root), imported
jre     eoslab/jre:<version>                 debian  Debian's OpenJDK 17 JRE
kafka   eoslab/kafka:<version>-<Kafka 3.9>   jre     services/kafka/lib (Kafka 3.9 and ZooKeeper)
kafka4  eoslab/kafka4:<version>-<Kafka 4>    jre     services/kafka4/lib (Kafka 4, KRaft)
python  eoslab/python:<version>              jre     Debian's Python 3.11 and PostgreSQL 15, a
                                                     virtualenv of the pinned dependencies
eoslab  eoslab/eoslab:<version>              python  the project's wheel, DAGs, suites, jobs, poms
                                                     and Spark's connectors
======  ===================================  ======  ==============================================

Each built image carries a label with the digest of its inputs (its Dockerfile, its parent
image, the files it copies, the pinned requirements): an image whose label matches is reused,
anything else is built again and the image it replaces removed. ``python -m
eoslab.runtime.images`` builds them (``--from-scratch`` removes them first); the compose
runtime builds or reuses them on every ``lab up``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException, ImageNotFound
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from requests.exceptions import RequestException

from eoslab.clients import CLIENTS_DIR, MATRIX_DRIVERS
from eoslab.runtime.engine import Say, engine_client
from eoslab.runtime.status import LabError
from eoslab.runtime.versions import KAFKA_VERSION, POMS
from eoslab.settings import HOST, project_root

INPUTS_LABEL = "org.eoslab.inputs"
"""The digest of an image's inputs: equal means up to date."""
BASE_LABEL = "org.eoslab.base"
"""On a debootstrapped base: how it was made (a pulled debian:bookworm-slim has none)."""
BASE_REF = "eoslab/debian:bookworm"
"""The lab's Debian base (the ``debian`` image)."""
SLIM = ("debian", "bookworm-slim")
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
PULL_TIMEOUT_S = 120
BUILD_TIMEOUT_S = 1800
DEBOOTSTRAP_TIMEOUT_S = 900
BUILD_REQUIREMENTS = ("setuptools==84.2.1", "wheel==0.48.0")
"""What building the project's wheel needs (pyproject's build-system), kept in the wheelhouse
so that the wheel builds without an index."""
OLDER_CLIENTS = ("confluent-kafka==2.2.0",)
"""eoslab.workload.drivers.librdkafka.OLDER_CLIENTS' packages (a lower layer may not import it; a test
holds the two equal): installed in the python image as `make setup` installs them."""
IMAGE_HOME = "/opt/eoslab"
"""Where the images keep what a checkout holds (EOSLAB_HOME in the eoslab image)."""
SKIPPED = {"__pycache__", ".fetched"}


def project_version() -> str:
    return metadata.version("eoslab")


def kafka_release(target: str) -> str:
    """The Kafka release a target's pom pins (``3.9.2``)."""
    found = KAFKA_VERSION.search((project_root() / POMS[target][0]).read_text())
    if found is None:
        raise LabError(f"no <kafka.version> in {POMS[target][0]}")
    return found.group(1)


def wheelhouse() -> Path:
    """The host's wheelhouse of the pinned dependencies, beside the virtualenv they mirror
    (`make clean` removes both)."""
    return project_root() / ".venv" / "compose-wheelhouse"


# ------------------------------------------------------------------------------------ inputs
def files_under(root: Path, *relative: str, suffix: str = "") -> list[Path]:
    """Every file under these folders of ``root`` (sorted; caches and stamps left out)."""
    found = []
    for name in relative:
        found += [
            path
            for path in (root / name).rglob(f"*{suffix}")
            if path.is_file() and not SKIPPED & set(path.relative_to(root).parts)
        ]
    return sorted(found)


def digest(parts: Iterable[str], files: Iterable[tuple[str, Path]]) -> str:
    """sha256 of the strings and files; a jar or a wheel is named by its name and size (its
    name carries its version), anything else by its bytes."""
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode() + b"\0")
    for name, path in files:
        sha.update(name.encode() + b"\0")
        if path.suffix in (".jar", ".whl"):
            sha.update(str(path.stat().st_size).encode())
        else:
            sha.update(hashlib.sha256(path.read_bytes()).digest())
    return sha.hexdigest()


def _applies(requirement: Requirement, extras: Iterable[str]) -> bool:
    """Whether a dependency holds for a distribution installed with these extras ("" the
    plain one) on this interpreter."""
    marker = requirement.marker
    return marker is None or any(marker.evaluate({"extra": extra}) for extra in extras)


def pinned_requirements() -> list[str]:
    """eoslab's runtime dependencies and theirs, at the versions installed in this virtualenv
    (its extras, such as ``dev``, left out): what the python image installs."""
    pins: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(text) for text in metadata.requires("eoslab") or []]
    todo = [requirement for requirement in todo if _applies(requirement, [""])]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        distribution = metadata.distribution(requirement.name)
        pins[name] = f"{name}=={distribution.version}"
        extras = ["", *requirement.extras]
        todo += [
            dependency
            for dependency in map(Requirement, distribution.requires or [])
            if _applies(dependency, extras)
        ]
    return sorted(pins.values())


# ------------------------------------------------------------------------------------ images
@dataclass(frozen=True)
class Image:
    """One image of the lab: where its Dockerfile is, what it is built on and what it copies."""

    name: str
    repository: str
    tag: str
    parent: str | None
    """The image (by name) it is built FROM."""
    files: Callable[[], list[tuple[str, Path]]] = field(default=list, compare=False)
    """(path in the build context, file) for everything the Dockerfile copies."""
    facts: Callable[[], list[str]] = field(default=list, compare=False)
    """Inputs beside files (the pinned requirements): part of the digest."""
    sources: Callable[[], list[tuple[str, Path]]] = field(default=list, compare=False)
    """Files the digest reads but the build does not copy (what the project's wheel, not
    reproducible byte for byte, is built from)."""

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def dockerfile(self) -> Path:
        return project_root() / "services" / self.name / "Dockerfile"


def _checkout_files(*relative: str, suffix: str = "") -> Callable[[], list[tuple[str, Path]]]:
    def files() -> list[tuple[str, Path]]:
        root = project_root()
        return [
            (str(path.relative_to(root)), path)
            for path in files_under(root, *relative, suffix=suffix)
        ]

    return files


def _kafka_files(name: str, logging: str) -> Callable[[], list[tuple[str, Path]]]:
    jars = _checkout_files(f"services/{name}/lib", suffix=".jar")
    return lambda: [
        *jars(),
        (f"services/{name}/{logging}", project_root() / "services" / name / logging),
    ]


def _requirements_facts() -> list[str]:
    return [*pinned_requirements(), *OLDER_CLIENTS, f"pip=={metadata.version('pip')}"]


PROJECT_FILES = ("dags", "expectations", "spark_jobs", "services/spark/jars")
"""What the lab reads from a checkout at run time, beside the package (the eoslab image's
/opt/eoslab); the poms too (a run records its Kafka release from them), and the matrices'
client drivers as ``make setup`` built them (the image has a JRE but neither Maven nor Go:
another release asked for in a container fails to build, in one line)."""


def _project_files() -> list[tuple[str, Path]]:
    root = project_root()
    poms = [root / pom for pom, _ in POMS.values()]
    drivers = [f"{CLIENTS_DIR}/{ref.folder}" for ref in MATRIX_DRIVERS]
    return [
        (f"project/{path.relative_to(root)}", path)
        for path in [*files_under(root, *PROJECT_FILES, *drivers), *poms]
    ]


def _wheel_sources() -> list[tuple[str, Path]]:
    """What the project's wheel is built from."""
    root = project_root()
    sources = [root / "pyproject.toml", root / "README.md", *files_under(root, "src/eoslab")]
    return [(str(path.relative_to(root)), path) for path in sources]


def lab_images() -> dict[str, Image]:
    """The images by name, parents before children."""
    version = project_version()
    images = [
        Image("debian", "eoslab/debian", "bookworm", None),
        Image("jre", "eoslab/jre", version, "debian"),
        Image(
            "kafka",
            "eoslab/kafka",
            f"{version}-{kafka_release('kafka')}",
            "jre",
            files=_kafka_files("kafka", "log4j.properties"),
        ),
        Image(
            "kafka4",
            "eoslab/kafka4",
            f"{version}-{kafka_release('kafka4')}",
            "jre",
            files=_kafka_files("kafka4", "log4j2.properties"),
        ),
        Image("python", "eoslab/python", version, "jre", facts=_requirements_facts),
        Image(
            "eoslab",
            "eoslab/eoslab",
            version,
            "python",
            files=_project_files,
            sources=_wheel_sources,
        ),
    ]
    return {image.name: image for image in images}


# ------------------------------------------------------------------------------------ base
def apt_mirrors(sources: Iterable[Path] | None = None) -> tuple[str, str]:
    """The Debian mirror and security mirror apt uses on this machine (one-line and deb822
    sources alike), else Debian's own."""
    if sources is None:
        apt = Path("/etc/apt")
        sources = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*"))]
    suites: dict[str, str] = {}
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^(URIs|Suites):\s*(.+)$", stanza, flags=re.MULTILINE))
            if fields:
                for suite in fields.get("Suites", "").split():
                    suites.setdefault(suite, fields.get("URIs", "").split()[0])
        for uri, suite in re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", text, re.M):
            suites.setdefault(suite, uri)
    return (
        suites.get(SUITE, DEFAULT_MIRROR),
        suites.get(f"{SUITE}-security", DEFAULT_SECURITY_MIRROR),
    )


SLIM_DPKG_EXCLUDES = """\
# as debian:bookworm-slim: no documentation, manuals or translations in the images
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
"""


def debootstrap_base(client: docker.DockerClient, reason: str, say: Say) -> None:
    """Debian's minbase from the mirror apt uses here, made like debian:bookworm-slim (the
    same sources, no documentation in later installs), imported as :data:`BASE_REF`."""
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise LabError(
            f"cannot make the lab's Debian base: debian:bookworm-slim cannot be pulled ({reason}) "
            "and building it from Debian's packages needs root and debootstrap "
            "(apt-get install debootstrap); pull debian:bookworm-slim where Docker Hub is reachable"
        )
    mirror, security = apt_mirrors()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eoslab-debian-", dir="/var/tmp") as folder:
        root = Path(folder) / "rootfs"
        _run(
            ["debootstrap", "--variant=minbase", SUITE, str(root), mirror],
            f"debootstrap of {SUITE} from {mirror}",
            DEBOOTSTRAP_TIMEOUT_S,
        )
        (root / "etc/apt/sources.list").write_text(
            f"deb {mirror} {SUITE} main\ndeb {mirror} {SUITE}-updates main\n"
            f"deb {security} {SUITE}-security main\n"
        )
        (root / "etc/dpkg/dpkg.cfg.d/docker").write_text(SLIM_DPKG_EXCLUDES)
        for leftover in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for path in (root / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        archive = Path(folder) / "rootfs.tar"
        _run(["tar", "-C", str(root), "-cf", str(archive), "."], "tar of the base", 300)
        repository, tag = BASE_REF.split(":")
        how = f"debootstrap --variant=minbase {SUITE} {mirror}"
        client.api.import_image_from_file(
            str(archive),
            repository,
            tag,
            changes=[
                f'LABEL {BASE_LABEL}="{how}"',
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                'CMD ["bash"]',
            ],
        )
    say(
        f"images: {BASE_REF} built from Debian's packages ({how}; debian:bookworm-slim could "
        f"not be pulled: {reason}) in {time.monotonic() - began:.0f} s"
    )


def ensure_base(client: docker.DockerClient, say: Say) -> str:
    """:data:`BASE_REF`, pulled or debootstrapped if it is not there; says how it was made."""
    try:
        image = client.images.get(BASE_REF)
    except ImageNotFound:
        pass
    else:
        return image.id
    began = time.monotonic()
    try:
        client.api.pull(*SLIM)  # a failure inside the pull's stream leaves no image to tag
        client.api.tag(":".join(SLIM), *BASE_REF.split(":"))
    except (DockerException, RequestException) as error:
        reason = getattr(error, "explanation", None) or str(error)  # the engine's own words
        debootstrap_base(client, first_line(str(reason)), say)
    else:
        say(
            f"images: {BASE_REF} is debian:bookworm-slim, pulled in {time.monotonic() - began:.0f} s"
        )
    return client.images.get(BASE_REF).id


def base_origin(client: docker.DockerClient) -> str:
    """How the base was made: debootstrapped (and how) or pulled."""
    labels = client.images.get(BASE_REF).labels or {}
    return labels.get(BASE_LABEL) or "debian:bookworm-slim, pulled"


# ------------------------------------------------------------------------------------ builds
def first_line(text: str) -> str:
    return next((line for line in text.strip().splitlines() if line.strip()), text)


def _run(argv: list[str], what: str, timeout_s: float) -> None:
    """A host command of a build; LabError with its last lines when it fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as error:
        raise LabError(f"{what} took over {timeout_s:.0f} s") from error
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise LabError(f"{what} failed (exit {done.returncode}):\n{tail}")


def _pip(*args: str, what: str) -> None:
    _run([sys.executable, "-m", "pip", *args], what, BUILD_TIMEOUT_S)


def ensure_wheelhouse(requirements: list[str]) -> Path:
    """The wheelhouse of ``requirements`` (and the wheel's build requirements, the older
    clients, pip), made with this virtualenv's pip from its caches; kept while the pins hold."""
    folder = wheelhouse()
    listed = folder / "requirements.txt"
    wanted = "\n".join([*requirements, *BUILD_REQUIREMENTS, *OLDER_CLIENTS]) + "\n"
    if listed.is_file() and listed.read_text() == wanted:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pinned = folder / "pinned.txt"
    pinned.write_text("\n".join(requirements) + "\n")
    pip = f"pip=={metadata.version('pip')}"
    common = ("wheel", "-q", "--no-deps", "--wheel-dir", str(folder))
    _pip(*common, "-r", str(pinned), *BUILD_REQUIREMENTS, pip, what="pip wheel (the wheelhouse)")
    for client in OLDER_CLIENTS:  # beside the pinned confluent-kafka: one at a time
        _pip(*common, client, what=f"pip wheel {client}")
    listed.write_text(wanted)
    return folder


def project_wheel(into: Path) -> Path:
    """The project's wheel, built from the checkout without an index (the wheelhouse holds its
    build requirements: made here too, as the python image that makes it may be cached while
    the wheelhouse is not, e.g. after `make clean`)."""
    _pip(
        "wheel",
        "-q",
        "--no-deps",
        "--no-index",
        "--find-links",
        str(ensure_wheelhouse(pinned_requirements())),
        "--wheel-dir",
        str(into),
        str(project_root()),
        what="building the project's wheel",
    )
    (wheel,) = into.glob("eoslab-*.whl")
    return wheel


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """``folder`` over HTTP on loopback while a build runs (builds use the host's network):
    the wheelhouse reaches pip without becoming a layer of the image."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Builder:
    """Builds (or reuses) the lab's images on one engine."""

    client: docker.DockerClient
    say: Say
    images: dict[str, Image] = field(default_factory=lab_images)
    built: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def ensure(self, names: Iterable[str]) -> dict[str, str]:
        """The images ``names`` (and their parents), built where their inputs changed; their
        refs by name."""
        wanted = set(names)
        order = [name for name in self.images if name in self._with_parents(wanted)]
        ids: dict[str, str] = {}
        for name in order:
            image = self.images[name]
            if image.parent is not None:
                ids[name] = self._ensure(image, ids[image.parent])
                continue
            began, existed = time.monotonic(), self._current(image) is not None
            ids[name] = ensure_base(self.client, self.say)
            if not existed:
                self.seconds[name] = round(time.monotonic() - began, 1)
                self.built.append(name)
        reused = [self.images[n].ref for n in order if n not in self.built]
        if reused:
            self.say(f"images: {', '.join(reused)} up to date (base: {base_origin(self.client)})")
        return {name: self.images[name].ref for name in order}

    def _with_parents(self, names: set[str]) -> set[str]:
        closure = set(names)
        for name in names:
            parent = self.images[name].parent
            while parent is not None:
                closure.add(parent)
                parent = self.images[parent].parent
        return closure

    def _ensure(self, image: Image, parent_id: str) -> str:
        files = image.files()
        inputs = digest(
            [image.dockerfile.read_text(), parent_id, *image.facts()],
            [*files, *image.sources()],
        )
        current = self._current(image)
        if current is not None and (current.labels or {}).get(INPUTS_LABEL) == inputs:
            return current.id
        began = time.monotonic()
        new_id = self._build(image, files, inputs)
        self.seconds[image.name] = round(time.monotonic() - began, 1)
        self.built.append(image.name)
        self.say(f"images: {image.ref} built in {self.seconds[image.name]:.0f} s")
        if current is not None and current.id != new_id:
            with contextlib.suppress(DockerException):  # gone unless a container uses it
                self.client.images.remove(current.id)
        return new_id

    def _current(self, image: Image) -> Any:
        """The image now tagged ``image.ref``, if any."""
        try:
            return self.client.images.get(image.ref)
        except ImageNotFound:
            return None

    def _build(self, image: Image, context: list[tuple[str, Path]], inputs: str) -> str:
        """Build ``image`` from ``context`` and what it makes on the host for it: the project's
        wheel (eoslab), the wheelhouse served while it builds (python)."""
        args = {
            "BASE": BASE_REF,
            "JRE": self.images["jre"].ref,
            "PYTHON": self.images["python"].ref,
        }
        with (
            tempfile.TemporaryDirectory(prefix=f"eoslab-image-{image.name}-") as tmp,
            contextlib.ExitStack() as stack,
        ):
            folder = Path(tmp)
            if image.name == "eoslab":
                wheel = project_wheel(folder / "dist")
                context = [*context, (f"dist/{wheel.name}", wheel)]
            if image.name == "python":
                pins = pinned_requirements()
                requirements = folder / "requirements.txt"
                requirements.write_text("\n".join(pins) + "\n")
                context = [*context, ("requirements.txt", requirements)]
                args |= {
                    "WHEELS": stack.enter_context(served(ensure_wheelhouse(pins))),
                    "CLIENTS": " ".join(OLDER_CLIENTS),
                    "PIP_VERSION": metadata.version("pip"),
                }
            return self._docker_build(image, context, args, inputs, folder)

    def _docker_build(
        self,
        image: Image,
        context: list[tuple[str, Path]],
        args: dict[str, str],
        inputs: str,
        folder: Path,
    ) -> str:
        archive = folder / "context.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(image.dockerfile, "Dockerfile")
            for name, path in context:
                tar.add(path, name)
        output: list[str] = []
        with archive.open("rb") as fileobj:
            for chunk in self.client.api.build(
                fileobj=fileobj,
                custom_context=True,
                tag=image.ref,
                buildargs=args,
                labels={INPUTS_LABEL: inputs},
                network_mode="host",
                rm=True,
                forcerm=True,
                decode=True,
                timeout=BUILD_TIMEOUT_S,
            ):
                output += str(chunk.get("stream", "")).splitlines()
                if "error" in chunk:
                    tail = "\n".join(output[-25:])
                    raise LabError(
                        f"building {image.ref} ({image.dockerfile}) failed: {chunk['error']}\n{tail}"
                    )
        return self.client.images.get(image.ref).id


def remove_all(client: docker.DockerClient, say: Say) -> None:
    """Every eoslab image and the build cache's leftovers, for a build from scratch; refuses
    while a container uses one."""
    refs = [image.ref for image in lab_images().values()]
    for ref in reversed(refs):
        try:
            client.images.remove(ref, force=False)
        except ImageNotFound:
            continue
        except DockerException as error:
            raise LabError(
                f"cannot remove {ref}: {first_line(str(error))}; bring the compose labs down first"
            ) from error
    client.images.prune(filters={"dangling": True})
    shutil.rmtree(wheelhouse(), ignore_errors=True)
    say(f"images: removed {', '.join(refs)}, the build cache's leftovers and the wheelhouse")


def main(argv: list[str] | None = None) -> int:
    """``python -m eoslab.runtime.images``: build the compose runtime's images, or reuse them."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument(
        "--from-scratch",
        action="store_true",
        help="remove every eoslab image, the wheelhouse and the build cache first",
    )
    parser.add_argument(
        "images", nargs="*", help=f"only these (default: all): {', '.join(lab_images())}"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.images) - lab_images().keys())
    try:
        if unknown:
            raise LabError(f"unknown image(s) {unknown}; choose among {', '.join(lab_images())}")
        client = engine_client(say=print)
        if args.from_scratch:
            remove_all(client, print)
        began = time.monotonic()
        Builder(client, print).ensure(args.images or lab_images())
    except LabError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"images: ready in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
