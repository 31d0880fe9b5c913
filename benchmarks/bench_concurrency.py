"""Lock waits beside a large ingest: how long a reader (the console) is kept out while `hetpool ingest file`
stages and commits a big exposition file, against the whole ingest (what a reader waited before runs were staged).

    .venv/bin/python -m benchmarks.bench_concurrency [--scrapes 800] [--workdir /tmp/hetpool-bench]

The writer is a real `hetpool ingest file` process; the reader is this process, opening the database for a
small query every 50 ms through the same gate as the console, and timing how long each read took to get in
(the gate, then DuckDB opening the file).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_ingest import generate  # noqa: E402
from benchmarks.common import report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=800, help="scrapes in the file (800 = 2.5M samples, 0.55 GiB)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hetpool-bench"))
    args = parser.parse_args()
    from store import Store

    args.workdir.mkdir(parents=True, exist_ok=True)
    file = args.workdir / f"dcgm-{args.scrapes}.prom"
    if not file.exists():
        generate(file, args.scrapes)
    db = args.workdir / "concurrency.duckdb"
    for stale in args.workdir.glob("concurrency.duckdb*"):
        stale.unlink()
    cli = [sys.executable, "-m", "app.cli", "--db", str(db)]
    subprocess.run([*cli, "registry", "load", str(REPO / "examples" / "fleet.yaml")], check=True, cwd=REPO,
                   capture_output=True)
    store = Store(db, timeout_s=600)
    waits: list[float] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            began = time.perf_counter()
            with store.read() as con:
                waited = time.perf_counter() - began
                con.execute("SELECT count(*) FROM ingest_runs").fetchall()
            waits.append(waited)
            time.sleep(0.05)

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(0.5)
    began = time.perf_counter()
    subprocess.run([*cli, "ingest", "file", str(file)], check=True, cwd=REPO, capture_output=True)
    ingest_s = time.perf_counter() - began
    time.sleep(0.5)
    stop.set()
    thread.join()
    worst = max(waits)
    print(f"{file.name}: {file.stat().st_size / 2**30:.2f} GiB; {len(waits)} reads during and around the ingest")
    report("whole ingest (the lock-out before staging)", ingest_s, "s")
    report("reader's longest time to get in (the commit)", worst, "s", ingest_s, "of the whole ingest")
    report("reader's median time to get in (DuckDB's open)", statistics.median(waits) * 1000, "ms")
    report("reads that waited over 1 s", sum(w > 1 for w in waits), "reads")


if __name__ == "__main__":
    main()
