"""Ingest speed: end-to-end file ingest against a plain DuckDB insert and prometheus_client's parser.

    .venv/bin/python -m benchmarks.bench_ingest [--scrapes 1628] [--repeat 3] [--workdir /tmp/hetpool-bench]

Writes a synthetic dcgm-exporter file (256 devices on 32 nodes, 12 metrics, one timestamped scrape every 15 s;
1628 scrapes = 5.0M samples, about 1.2 GB), then runs each measurement in its own process with one thread
(POLARS_MAX_THREADS=1, DuckDB threads=1) and reports samples/s and the peak RSS of each process (the best
time of --repeat runs, and the largest peak):

  e2e        hetpool's ingest: parse, normalize (profiles, pools, units, derived memory total, XID events),
             store (idempotent insert, rollups) into a fresh database holding the example fleet
  insert     (a) a plain DuckDB INSERT of the same canonical rows from an Arrow table already in memory
  reference  (b) prometheus_client's text parser alone, on the first 60k lines of the same file
  read       (c) the same file read in the same chunks with the same modules imported, and nothing done with
             them: the floor of a streaming ingest, the baseline of the peak-RSS-per-GiB-read figure
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import peak_rss_mib  # noqa: E402  (after the path above)

DCGM_FIELDS = [
    ("DCGM_FI_DEV_SM_CLOCK", lambda r: r.choice((1410, 1755, 1980))),
    ("DCGM_FI_DEV_MEM_CLOCK", lambda r: 2619),
    ("DCGM_FI_DEV_MEMORY_TEMP", lambda r: r.randint(30, 80)),
    ("DCGM_FI_DEV_GPU_TEMP", lambda r: r.randint(30, 85)),
    ("DCGM_FI_DEV_POWER_USAGE", lambda r: round(r.uniform(60, 700), 3)),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", None),  # cumulative, filled in below
    ("DCGM_FI_DEV_GPU_UTIL", lambda r: r.randint(0, 100)),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", lambda r: r.randint(0, 100)),
    ("DCGM_FI_DEV_XID_ERRORS", None),  # sticky code, filled in below
    ("DCGM_FI_DEV_FB_FREE", lambda r: r.randint(1000, 80000)),
    ("DCGM_FI_DEV_FB_USED", lambda r: r.randint(1000, 80000)),
    ("DCGM_FI_DEV_FB_RESERVED", lambda r: 591),
]
DEVICES, PER_NODE, STEP_MS, T0 = 256, 8, 15_000, 1_764_000_000_000


def generate(path: Path, scrapes: int, seed: int = 7) -> int:
    """Write the synthetic file; returns the number of samples."""
    rng = random.Random(seed)
    labels = [
        f'gpu="{d % PER_NODE}",UUID="GPU-{d:08x}-6d3c-22ed-0ec8-d3b864870b8b",pci_bus_id="00000000:{d % PER_NODE:02X}'
        f':00.0",device="nvidia{d % PER_NODE}",modelName="NVIDIA H100 80GB HBM3",Hostname="h100-a-{d // PER_NODE:03d}",'
        f'DCGM_FI_DRIVER_VERSION="550.144.03"' for d in range(DEVICES)]
    energy = [rng.randint(10**9, 10**10) for _ in range(DEVICES)]
    xid = [0] * DEVICES
    with path.open("w") as f:
        for s in range(scrapes):
            ts = T0 + s * STEP_MS
            out = []
            for name, make in DCGM_FIELDS:
                out.append(f"# HELP {name} {name}.\n# TYPE {name} gauge\n")
                for d in range(DEVICES):
                    if name.endswith("ENERGY_CONSUMPTION"):
                        energy[d] += rng.randint(900_000, 10_000_000)
                        value: object = energy[d]
                    elif name.endswith("XID_ERRORS"):
                        if rng.random() < 0.0005:
                            xid[d] = rng.choice((13, 31, 43, 48, 79, 94))
                        value = xid[d]
                    else:
                        assert make is not None
                        value = make(rng)
                    out.append(f"{name}{{{labels[d]}}} {value} {ts}\n")
            f.write("".join(out))
    return scrapes * DEVICES * len(DCGM_FIELDS)


def _one_thread() -> None:
    from benchmarks.common import single_core

    single_core()


def child_e2e(file: Path, db: Path) -> dict[str, float]:
    """End-to-end ingest of the file into a fresh database, the way `hetpool ingest file` does it: staged with no
    lock held, then committed in one transaction of a connection opened for it (and closed, with its checkpoint)."""
    _one_thread()
    os.environ["HETPOOL_DUCKDB_THREADS"] = "1"
    from collectors.files import read_chunks
    from collectors.pipeline import IngestOptions, ingest_exposition
    from pool_registry import load_registry
    from store import Store, save_registry

    store = Store(db)
    with store.transaction("bench") as con:
        save_registry(con, load_registry(REPO / "examples" / "fleet.yaml"), "fleet.yaml")
    t = time.perf_counter()
    report = ingest_exposition(store, lambda: read_chunks(file), kind="file", source=str(file),
                               options=IngestOptions())
    elapsed = time.perf_counter() - t
    with store.read() as con:
        rows = con.sql("SELECT count(*) FROM samples").fetchall()[0]
    return {"seconds": elapsed, **report.as_dict(), "rows": rows[0] if rows else 0}


def child_insert(source_db: Path, db: Path) -> dict[str, float]:
    """(a): the canonical rows the e2e run stored, inserted from Arrow into a fresh samples table."""
    _one_thread()
    import duckdb

    src = duckdb.connect(str(source_db), read_only=True)
    arrow = src.sql("SELECT ts, pool, node, device, metric, value, attributes FROM samples").arrow().read_all()
    src.close()
    con = duckdb.connect(str(db))
    con.execute("SET threads = 1")
    con.execute("CREATE TABLE samples (ts BIGINT NOT NULL, pool VARCHAR NOT NULL, node VARCHAR NOT NULL, "
                "device VARCHAR NOT NULL, metric VARCHAR NOT NULL, value DOUBLE NOT NULL, "
                "attributes VARCHAR NOT NULL DEFAULT '{}')")
    con.register("rows", arrow)
    t = time.perf_counter()
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO samples SELECT * FROM rows")
    con.execute("COMMIT")
    elapsed = time.perf_counter() - t
    con.close()
    return {"seconds": elapsed, "rows": arrow.num_rows}


def child_read(file: Path) -> dict[str, float]:
    """(c): the file's chunks read as the e2e run reads them, with its modules loaded, and dropped."""
    _one_thread()
    import collectors.pipeline  # noqa: F401  (the e2e run's modules: polars, duckdb, the normalizers)
    from collectors.files import read_chunks

    t = time.perf_counter()
    size = sum(len(chunk) for chunk in read_chunks(file))
    return {"seconds": time.perf_counter() - t, "bytes": size}


def child_reference(file: Path, lines: int) -> dict[str, float]:
    """(b): prometheus_client's parser over the first lines of the file."""
    from prometheus_client.parser import text_string_to_metric_families

    with file.open() as f:
        text = "".join(f.readline() for _ in range(lines))
    t = time.perf_counter()
    samples = sum(len(family.samples) for family in text_string_to_metric_families(text))
    return {"seconds": time.perf_counter() - t, "samples": samples}


def run_child(*args: str) -> tuple[dict[str, float], float]:
    """Run this script as a child; return its JSON result and its peak RSS in MiB."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_ingest", "--child", *args],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"child {args[0]} failed with exit code {proc.returncode}")
    result = json.loads(out)
    # The child's own peak (its wait4 usage would carry this process's peak across exec).
    return result, float(result.pop("peak_mib", usage.ru_maxrss / 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=1628, help="scrapes in the file (1628 = 5.0M samples)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hetpool-bench"))
    parser.add_argument("--reference-lines", type=int, default=60_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the best time counts")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "e2e":
            result = child_e2e(Path(rest[0]), Path(rest[1]))
        elif kind == "insert":
            result = child_insert(Path(rest[0]), Path(rest[1]))
        elif kind == "read":
            result = child_read(Path(rest[0]))
        else:
            result = child_reference(Path(rest[0]), int(rest[1]))
        print(json.dumps({**result, "peak_mib": peak_rss_mib()}))
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    file = args.workdir / f"dcgm-{args.scrapes}.prom"
    if not file.exists():
        t = time.perf_counter()
        n = generate(file, args.scrapes)
        print(f"generated {n:,} samples, {file.stat().st_size / 2**30:.2f} GiB in {time.perf_counter() - t:.0f}s")
    for stale in args.workdir.glob("*.duckdb*"):
        stale.unlink()
    e2e_db, insert_db = args.workdir / "e2e.duckdb", args.workdir / "insert.duckdb"

    def best(*child: str) -> tuple[dict[str, float], float]:
        runs = []
        for _ in range(args.repeat):
            for stale in args.workdir.glob("*.duckdb*"):
                if child[0] == "e2e" or stale.name.startswith("insert"):
                    stale.unlink()
            runs.append(run_child(*child))
        return min(runs, key=lambda r: r[0]["seconds"])[0], max(r[1] for r in runs)

    e2e, e2e_rss = best("e2e", str(file), str(e2e_db))
    plain, plain_rss = best("insert", str(e2e_db), str(insert_db))
    ref, _ = best("reference", str(file), str(args.reference_lines))
    _, read_rss = best("read", str(file))
    e2e_rate = e2e["read"] / e2e["seconds"]
    insert_rate = plain["rows"] / plain["seconds"]
    ref_rate = ref["samples"] / ref["seconds"]
    size = file.stat().st_size
    print(f"input: {file.name}, {size / 2**30:.2f} GiB, {int(e2e['read']):,} samples -> {int(e2e['rows']):,} "
          f"canonical rows (stored {int(e2e['stored']):,}, rejected {int(e2e['rejected']):,}, "
          f"folded {int(e2e['duplicates']):,})")
    print(f"e2e ingest      {e2e['seconds']:7.2f} s  {e2e_rate:12,.0f} samples/s  peak RSS {e2e_rss:6.0f} MiB")
    print(f"(a) DuckDB insert {plain['seconds']:5.2f} s  {insert_rate:12,.0f} rows/s     peak RSS {plain_rss:6.0f} MiB")
    print(f"(b) prometheus_client {ref['seconds']:5.2f} s  {ref_rate:8,.0f} samples/s "
          f"({int(ref['samples']):,} samples)")
    print(f"targets: e2e >= 1,000,000/s: {e2e_rate:,.0f} {'OK' if e2e_rate >= 1e6 else 'MISSED'}; "
          f">= 1/3 of (a): {e2e_rate / insert_rate:.2f} {'OK' if e2e_rate >= insert_rate / 3 else 'MISSED'}; "
          f">= 50x (b): {e2e_rate / ref_rate:.0f}x {'OK' if e2e_rate >= 50 * ref_rate else 'MISSED'}; "
          f"peak RSS < 1 GiB for {size / 2**30:.2f} GiB: {e2e_rss:.0f} MiB {'OK' if e2e_rss < 1024 else 'MISSED'}")
    per_gib, floor_per_gib = e2e_rss / 1024 / (size / 2**30), read_rss / 1024 / (size / 2**30)
    print(f"peak RSS per GiB read: e2e {per_gib:.2f} GiB/GiB = {per_gib / floor_per_gib:.2f}x of (c) reading the "
          f"file alone ({floor_per_gib:.2f} GiB/GiB, {read_rss:.0f} MiB); target < 1 GiB per GiB: "
          f"{'OK' if per_gib < 1 else 'MISSED'}")


if __name__ == "__main__":
    main()
