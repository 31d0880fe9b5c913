"""Pull 24 h x 256 devices x 8 metrics at 15 s (~11M samples) from a local Prometheus into DuckDB.

Prints hetpool's pull rate on one core, the ratio to Prometheus answering the same queries (a raw HTTP fetch of
the JSON, measured in the same run), and the time of a 1-minute rollup update after a 15-minute pull.
Run: .venv/bin/python -m benchmarks.bench_prometheus [--hours 24] [--devices 256]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.common import peak_rss_mib, report, single_core

single_core()

import requests  # noqa: E402

from collectors.prometheus import PullOptions, chunks, pull  # noqa: E402
from collectors.promhttp import PromClient  # noqa: E402
from pool_registry import load_registry  # noqa: E402
from store import Held, connect, save_registry  # noqa: E402
from store.rollups import refresh_rollups  # noqa: E402
from tests.promserver import STEP_S, T0_S, PrometheusServer  # noqa: E402

FIELDS = (  # (name, value at step k for series i)
    ("DCGM_FI_DEV_GPU_UTIL", lambda i, k: (i * 7 + k) % 101),
    ("DCGM_FI_DEV_FB_USED", lambda i, k: 1000 + (i + k) % 5000),
    ("DCGM_FI_DEV_FB_FREE", lambda i, k: 80000 - (i + k) % 5000),
    ("DCGM_FI_DEV_POWER_USAGE", lambda i, k: 100 + (i + k) % 600),
    ("DCGM_FI_DEV_GPU_TEMP", lambda i, k: 40 + (i + k) % 45),
    ("DCGM_FI_DEV_MEMORY_TEMP", lambda i, k: 45 + (i + k) % 40),
    ("DCGM_FI_DEV_SM_CLOCK", lambda i, k: 1980 - (i + k) % 600),
    ("DCGM_FI_DEV_FB_RESERVED", lambda i, k: 512),
)


class BigFleet:
    """DCGM-style history for N devices on 8-GPU nodes named like the example fleet's H100 pool."""

    def __init__(self, hours: int, devices: int):
        self.hours, self.devices = hours, devices
        self.steps = hours * 3600 // STEP_S
        self.end_s = T0_S + (self.steps - 1) * STEP_S

    def openmetrics(self) -> Iterator[str]:
        """The history as OpenMetrics text, one series at a time."""
        times = [str(T0_S + k * STEP_S) for k in range(self.steps)]
        for name, fn in FIELDS:
            yield f"# TYPE {name} gauge\n"
            for i in range(self.devices):
                node, gpu = f"h100-a-{i // 8:02d}", i % 8
                lbl = (f'{name}{{gpu="{gpu}",UUID="GPU-{i:08d}",modelName="NVIDIA H100 80GB HBM3",'
                       f'Hostname="{node}",DCGM_FI_DRIVER_VERSION="550.144.03"}} ')
                yield "".join(f"{lbl}{fn(i, k)} {t}\n" for k, t in enumerate(times))
        yield "# EOF\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--devices", type=int, default=256)
    args = ap.parse_args()
    fleet = BigFleet(args.hours, args.devices)
    samples = fleet.steps * fleet.devices * len(FIELDS)
    with tempfile.TemporaryDirectory(prefix="hetpool-bench-") as tmp:
        work = Path(tmp)
        t = time.perf_counter()
        server = PrometheusServer(work, fleet).start()
        print(f"history: {samples:,} samples written and backfilled in {time.perf_counter() - t:.0f} s", flush=True)
        try:
            start_ms, end_ms = T0_S * 1000 - 1, fleet.end_s * 1000
            opts = PullOptions(url=server.url, profiles=("dcgm",), start_ms=start_ms, end_ms=end_ms)
            names = [n for n, _ in FIELDS]
            session = requests.Session()
            t = time.perf_counter()
            fetched = 0
            for lo, hi in chunks(start_ms, end_ms, opts.step_ms, opts.chunk_ms):
                for n in names:
                    r = session.get(f"{server.url}/api/v1/query",
                                    params={"query": f'{{__name__="{n}"}}[{hi - lo}ms]', "time": f"{hi / 1000:.3f}"})
                    fetched += len(r.content)
            prom_s = time.perf_counter() - t
            report("prometheus answering the queries (raw JSON)", samples / prom_s, "samples/s")
            con = connect(work / "bench.duckdb")
            con.execute("SET threads = 1")
            save_registry(con, load_registry(Path(__file__).resolve().parent.parent / "examples" / "fleet.yaml"), "x")
            t = time.perf_counter()
            result = pull(Held(con), PromClient(server.url), opts)
            pull_s = time.perf_counter() - t
            stored = result.totals()["stored"]
            report("hetpool pull into DuckDB (1 core)", stored / pull_s, "samples/s", samples / prom_s,
                   "of prometheus alone")
            print(f"  stored {stored:,} of {samples:,} samples; {fetched / 1e6:,.0f} MB of JSON; "
                  f"pull {pull_s:.1f} s vs prometheus {prom_s:.1f} s; peak RSS {peak_rss_mib():,.0f} MiB")
            t = time.perf_counter()
            con.execute("BEGIN TRANSACTION")
            refresh_rollups(con, end_ms - 15 * 60_000, end_ms)
            con.execute("COMMIT")
            report("1m+1h rollup update after a 15 min pull", (time.perf_counter() - t) * 1000, "ms")
            con.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
