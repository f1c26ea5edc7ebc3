"""`make bench`: bring up a lab of the benchmark's own, run every benchmark, write JSON.

Results go to bench/results/<UTC time>.json (and bench/results/latest.json), each figure with
its comparison point measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from eoslab.bench import produce_throughput
from eoslab.paths import project_root
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig

BENCH_PORT_OFFSET = 4000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=50_000, help="records per throughput run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=project_root() / "bench" / "results")
    args = parser.parse_args()

    started = time.time()
    results: dict[str, object] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    with tempfile.TemporaryDirectory(prefix="eoslab-bench-") as state:
        lab = LocalRuntime(
            LabConfig(
                state_dir=Path(state),
                port_offset=BENCH_PORT_OFFSET,
                brokers=1,
                with_refbroker=False,
                direct_listener=True,
            )
        )
        lab.up()
        try:
            results["produce_throughput"] = produce_throughput.run(lab, args.records, args.repeats)
        finally:
            lab.down()
    results["seconds"] = round(time.time() - started, 1)

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}.json"
    text = json.dumps(results, indent=2)
    path.write_text(text)
    (args.out / "latest.json").write_text(text)
    print(text)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
