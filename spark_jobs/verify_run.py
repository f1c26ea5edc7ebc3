"""spark-submit entry point of the checker (also runs under plain python).

    spark-submit --master local[2] spark_jobs/verify_run.py RUN_DIR [--bootstrap HOST:PORT]
    python spark_jobs/verify_run.py RUN_DIR --remote sc://HOST:PORT     (a Spark Connect server)

Writes RUN_DIR/checker/ and exits 0 when the run conforms, 1 when it does not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eoslab.verify.checker import verify_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    parser.add_argument("--remote", help="a Spark Connect server instead (sc://HOST:PORT)")
    parser.add_argument("--bootstrap", help="read the topic from these bootstrap servers instead")
    args = parser.parse_args()
    verdict = verify_run(
        args.run_dir, master=args.master, bootstrap=args.bootstrap, remote=args.remote
    )
    print(f"{verdict.run_id}: {'conforms' if verdict.conforms else 'does not conform'}")
    for mismatch in verdict.mismatches:
        print(f"  {mismatch.summary}")
    return 0 if verdict.conforms else 1


if __name__ == "__main__":
    sys.exit(main())
