"""How far one hetpool goes: a day of canonical minutes for fleets of 1k, 4k and 16k devices.

For each size it generates, with a seeded RNG and in chunks of minutes streamed to disk:
  fleet.yaml  the example fleet's chips and models with pools of POOL_DEVICES devices, 8 per node, cycling
              through the five chips;
  day.prom    one day (DAY) of minute samples with millisecond timestamps, as `hetpool rules` records them
              and `hetpool serve-feed` serves them: the 10 canonical gauges and counters of every device, one
              `accelerator_errors_total` counter per device (a few rise: XID 79, ECC, thermal) and two
              `hetpool_software_version_info` series per node (a few nodes upgrade their driver at noon);
then loads the registry (`hetpool registry load`), ingests the file with `--canonical` through the library call
`hetpool ingest file` makes, and times the queries of three console pages on the day (the 24 h window the
pages open on, every pool in view), calling the same `store/views` functions the pages' `data.py` calls:
  Fleet health  tiles of the window and of the previous one, the status facts, the time series, the severe
                events and version changes marked on them, the worst devices and the software drift;
  Errors        nodes to drain, reliability index, error classes over time, the event table;
  Versions      the version matrix, compatibility, coverage per node and exporter version, vanished metrics.
Every figure is printed with its ratio to the smallest size of the run and to the device-count ratio.

Run: .venv/bin/python -m benchmarks.bench_fleet [--sizes 1000,4000,16000] [--keep DIR]

Target: Fleet health's queries under 1 s at 16k devices, growing no faster than the device count.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import peak_rss_mib, report
from canonical import metrics
from canonical.feednames import ERRORS_SAMPLE, VERSION_SAMPLE, sample_name
from canonical.timeunits import DAY_MS, MINUTE_MS

REPO = Path(__file__).resolve().parents[1]
DAY = 1_795_996_800_000  # 2026-11-30T00:00:00Z
MINUTES = DAY_MS // MINUTE_MS
CHUNK_MINUTES = 10  # minutes generated and written at a time (720 is a multiple: the noon upgrade is a boundary)
POOL_DEVICES = 256
DEVICES_PER_NODE = 8
SEED = 7
TARGET_S = 1.0
# chip, vendor, exporter, declared stack (the example fleet's), in the order pools cycle through them
CHIPS = (("h100-sxm", "nvidia", "dcgm", {"driver": "550.144.03", "cuda": "12.4", "vllm": "0.15.1"}),
         ("mi300x", "amd", "amd", {"driver": "6.10.5", "rocm": "6.3.1", "vllm": "0.15.1"}),
         ("ascend-910b", "huawei", "ascend", {"driver": "24.1.rc3", "cann": "8.0.0", "vllm": "0.15.0"}),
         ("gaudi3", "intel", "gaudi", {"driver": "1.22.1", "vllm": "0.15.1"}),
         ("mlu370-x8", "cambricon", "cambricon", {"driver": "6.2.10", "cntoolkit": "4.0.0", "vllm": "0.15.0"}))
HBM_BYTES = {"h100-sxm": 80e9, "mi300x": 192e9, "ascend-910b": 64e9, "gaudi3": 128e9, "mlu370-x8": 48e9}
# the 10 canonical metrics every device reports each minute
GAUGES = (metrics.UTILIZATION, metrics.MEMORY_USED, metrics.MEMORY_TOTAL, metrics.POWER, metrics.TEMPERATURE,
          metrics.CLOCK, metrics.HEALTH, metrics.ENERGY, metrics.LINK_TX, metrics.LINK_RX)
# (error_class, severity, code, share of devices whose counter carries it, events per such device per day)
PLANTED_ERRORS = (("device_lost", "fatal", "79", 0.25, 0.02),
                  ("memory_correctable", "recoverable", "ecc_sbe", 0.5, 0.5),
                  ("thermal", "recoverable", "thermal", 0.25, 0.1))
UPGRADED_NODES = 0.02  # share of nodes whose driver changes at noon (drift on the Versions page)
EXPORTER_VERSION = "3.3.9"
COLUMNS = ("devices", "samples", "file MiB", "B/device-day", "ingest s", "samples/s", "db MiB", "health s",
           "errors s", "versions s")


@dataclass(frozen=True)
class Pool:
    """One generated pool: its id, chip row and device count."""

    id: str
    chip: str
    vendor: str
    exporter: str
    stack: dict[str, str]
    devices: int

    @property
    def nodes(self) -> int:
        """Nodes of the pool."""
        return self.devices // DEVICES_PER_NODE


def pools_for(devices: int) -> list[Pool]:
    """Pools of POOL_DEVICES devices (the last one smaller) holding `devices`, cycling through CHIPS."""
    if devices < DEVICES_PER_NODE or devices % DEVICES_PER_NODE:
        raise SystemExit(f"a size must be a positive multiple of {DEVICES_PER_NODE} devices, got {devices}")
    out = []
    for i, start in enumerate(range(0, devices, POOL_DEVICES)):
        chip, vendor, exporter, stack = CHIPS[i % len(CHIPS)]
        out.append(Pool(f"p{i:03d}", chip, vendor, exporter, stack, min(POOL_DEVICES, devices - start)))
    return out


def fleet_yaml(pools: list[Pool]) -> str:
    """The example fleet's chips and models with the generated pools."""
    head = (REPO / "examples" / "fleet.yaml").read_text(encoding="utf-8").split("\npools:")[0]
    body = []
    for p in pools:
        stack = ", ".join(f'{k}: "{v}"' for k, v in p.stack.items())
        body.append(f"""  - id: {p.id}
    chip: {p.chip}
    devices: {p.devices}
    devices_per_node: {DEVICES_PER_NODE}
    hourly_cost_per_device: 2.0
    exporter: {p.exporter}
    assign: {{node_pattern: "{p.id}-*"}}
    stack: {{{stack}}}
    serving: {{model: llama-3.1-70b, engine: vllm, replicas: {p.devices // 8}, devices_per_replica: 8, \
max_concurrency: 64}}
    cost_model: {{mfu: 0.4, mem_bw_eff: 0.7}}
    onboarding: {{stage: production, started: 2026-01-05}}
""")
    return head + "\npools:\n" + "".join(body)


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


class Fleet:
    """Every series of the fleet: the prefix of its lines (name and labels) and what drives its values."""

    def __init__(self, pools: list[Pool], rng: np.random.Generator):
        places = [(p, f"{p.id}-{n:03d}", f"{p.vendor}{d}") for p in pools for n in range(p.nodes)
                  for d in range(DEVICES_PER_NODE)]
        self.devices = len(places)
        base = [dict(pool=p.id, node=node, device=dev, vendor=p.vendor) for p, node, dev in places]
        self.device_prefixes = [sample_name(m) + _labels(**b) + " " for m in GAUGES for b in base]
        # one error counter per device, of a class drawn by share
        shares = np.array([e[3] for e in PLANTED_ERRORS])
        self.error_kind = rng.choice(len(PLANTED_ERRORS), size=self.devices, p=shares / shares.sum())
        self.error_prefixes = [ERRORS_SAMPLE + _labels(**b, error_class=PLANTED_ERRORS[k][0],
                                                       severity=PLANTED_ERRORS[k][1], code=PLANTED_ERRORS[k][2]) + " "
                               for b, k in zip(base, self.error_kind, strict=True)]
        self.error_rate = np.array([PLANTED_ERRORS[k][4] for k in self.error_kind]) / MINUTES
        self.errors = np.zeros(self.devices)
        nodes = [(p, f"{p.id}-{n:03d}") for p in pools for n in range(p.nodes)]
        upgraded = rng.random(len(nodes)) < UPGRADED_NODES

        def versions(after_noon: bool) -> list[str]:
            out = []
            for (p, node), up in zip(nodes, upgraded, strict=True):
                driver = p.stack["driver"] + ("-1" if up and after_noon else "")
                out.append(VERSION_SAMPLE + _labels(pool=p.id, node=node, component="driver", version=driver) + " ")
                out.append(VERSION_SAMPLE + _labels(pool=p.id, node=node, component="exporter",
                                                    version=EXPORTER_VERSION) + " ")
            return out

        self.version_prefixes = (versions(False), versions(True))
        self.hbm = np.array([HBM_BYTES[p.chip] for p, _, _ in places])
        self.level = rng.uniform(0.3, 0.9, self.devices)  # each device's mean utilization
        self.capped = rng.random(self.devices) < 0.02  # power-capped devices run a slower clock
        self.energy = np.zeros(self.devices)
        self.rng = rng

    def minute(self, m: int) -> np.ndarray:
        """The 10 gauge values of every device at minute m, metric-major (one row per GAUGES entry)."""
        rng, n = self.rng, self.devices
        diurnal = 0.15 * math.sin(2 * math.pi * (m / MINUTES - 0.25))
        util = np.clip(self.level + diurnal + rng.normal(0, 0.05, n), 0, 1).round(3)
        power = (150 + 550 * util + rng.normal(0, 10, n)).round(1)
        self.energy += power * 60
        healthy = (rng.random(n) > 1e-5).astype(float)
        clock = np.where(self.capped, 1.5e9, 1.98e9) + rng.normal(0, 5e6, n).round(-6)
        return np.stack([util, (self.hbm * (0.5 + 0.4 * util)).round(-6), self.hbm,
                         power, (40 + 40 * util + rng.normal(0, 1.5, n)).round(1), clock, healthy,
                         self.energy.round(), (util * 2e11).round(-6), (util * 1.9e11).round(-6)])

    def chunk(self, first: int, minutes: int) -> pl.DataFrame:
        """The lines of minutes [first, first + minutes), one column of text."""
        parts = []
        for m in range(first, first + minutes):
            self.errors += self.rng.random(self.devices) < self.error_rate
            values = np.concatenate([self.minute(m).ravel(), self.errors])
            prefixes = self.device_prefixes + self.error_prefixes + self.version_prefixes[m >= MINUTES // 2]
            values = np.concatenate([values, np.ones(len(self.version_prefixes[0]))])
            parts.append(pl.DataFrame({"p": prefixes, "v": values, "t": DAY + m * MINUTE_MS}))
        frame = pl.concat(parts)
        return frame.select(pl.concat_str(["p", pl.col("v").cast(pl.String), pl.lit(" "),
                                           pl.col("t").cast(pl.String)]).alias("line"))


def write_day(path: Path, pools: list[Pool]) -> int:
    """Write the day's exposition file; returns the samples written."""
    fleet = Fleet(pools, np.random.default_rng(SEED))
    samples = 0
    with path.open("wb") as f:
        f.write(b"".join(f"# TYPE {sample_name(m).removesuffix('_total')} "
                         f"{'counter' if m == metrics.ENERGY else 'gauge'}\n".encode() for m in GAUGES))
        f.write(b"# TYPE accelerator_errors counter\n")
        for first in range(0, MINUTES, CHUNK_MINUTES):
            lines = fleet.chunk(first, CHUNK_MINUTES)
            samples += lines.height
            lines.write_csv(f, include_header=False, quote_style="never")
    return samples


def hetpool(*argv: str) -> None:
    """One CLI command in this process, output discarded; a non-zero exit is an error."""
    from app.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    if code != 0:
        raise SystemExit(f"hetpool {' '.join(argv)} exited {code}")


def ingest(db: Path, path: Path) -> tuple[float, int]:
    """`hetpool ingest file PATH --canonical` through its library call; (seconds, samples stored)."""
    from collectors.files import read_chunks
    from collectors.pipeline import IngestOptions, ingest_exposition, make_context
    from store import Store

    store = Store(db).ensure("bench_fleet")
    options = IngestOptions(canonical=True)
    start = time.perf_counter()
    result = ingest_exposition(store, lambda: read_chunks(path), kind="file", source=str(path), options=options,
                               context=make_context(store, options))
    took = time.perf_counter() - start
    c = result.counts
    if c.rejected:
        raise SystemExit(f"{c.rejected} samples rejected: {result.reasons.most_common(3)}")
    return took, c.stored


def page_queries(db: Path) -> dict[str, list[tuple[str, Callable[[], object]]]]:
    """The queries each page makes for the day, every pool in view, as its data.py calls them."""
    from app.console.charts import bucket_ms
    from app.status_read import read_facts
    from replay.planner.compat import compatibility
    from status.evaluate import warning_temperatures
    from status.rules import load_rules
    from store import connect, latest_registry
    from store.views import coverage, drift, health, markers, reliability, versions
    from store.views.window import Window

    con = connect(db, read_only=True)
    snap = latest_registry(con)
    assert snap is not None
    reg = snap.registry
    rules = load_rules()
    pools = tuple(p.id for p in reg.pools)
    w, before = Window(DAY, DAY + DAY_MS, pools), Window(DAY - DAY_MS, DAY, pools)
    step = bucket_ms(DAY_MS)

    def version_report() -> object:
        per_node = coverage.node_coverage(con, reg, w)
        return (versions.version_matrix(con, reg, w), compatibility(reg, pools),
                coverage.exporter_coverage(con, reg, w, per_node), coverage.vanished_metrics(con, reg, w, per_node))

    return {
        "health": [("tiles", lambda: health.pool_tiles(con, w, list(pools))),
                   ("tiles, previous day", lambda: health.pool_tiles(con, before, list(pools))),
                   ("status facts", lambda: read_facts(con, w, list(pools), now_ms=0)),
                   ("series", lambda: health.metric_series(con, w, step)),
                   ("severe events", lambda: markers.severe_events(con, w, step)),
                   ("version changes", lambda: markers.version_changes(con, w)),
                   ("worst devices", lambda: health.worst_devices(con, w, warning_temperatures(reg, rules),
                                                                   rules.temperature.warning)),
                   ("version drift", lambda: drift.version_drift(con, reg, list(pools), w))],
        "errors": [("nodes to drain", lambda: reliability.nodes_to_drain(con, w)),
                   ("reliability index", lambda: reliability.reliability(con, w)),
                   ("error timeline", lambda: reliability.error_timeline(con, w, step)),
                   ("error events", lambda: reliability.error_events(con, w))],
        "versions": [("version report", version_report)],
    }


def time_pages(db: Path, repeat: int = 2) -> dict[str, dict[str, float]]:
    """Best of `repeat` seconds of every query of every page (the first run reads DuckDB's file cold)."""
    out: dict[str, dict[str, float]] = {}
    for page, queries in page_queries(db).items():
        out[page] = {}
        for name, fn in queries:
            best = math.inf
            for _ in range(repeat):
                start = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - start)
            out[page][name] = best
    return out


def measure(devices: int, tmp: Path) -> dict[str, float]:
    """Generate, load, ingest and query one size; the row of figures."""
    pools = pools_for(devices)
    here = tmp / f"fleet-{devices}"
    here.mkdir(parents=True, exist_ok=True)
    fleet, day, db = here / "fleet.yaml", here / "day.prom", here / "hetpool.duckdb"
    fleet.write_text(fleet_yaml(pools), encoding="utf-8")
    start = time.perf_counter()
    samples = write_day(day, pools)
    written = time.perf_counter() - start
    size = day.stat().st_size
    report(f"{devices:,} devices: wrote {samples:,} samples in", written, "s")
    hetpool("--db", str(db), "registry", "load", str(fleet))
    took, stored = ingest(db, day)
    report(f"{devices:,} devices: ingested {stored:,} stored rows in", took, "s")
    pages = time_pages(db)
    for page, times in pages.items():
        for name, s in times.items():
            report(f"  {page}: {name}", s * 1000, "ms")
    db_bytes = sum(p.stat().st_size for p in here.glob("hetpool.duckdb*"))
    return {"devices": devices, "samples": samples, "file MiB": size / 2**20, "B/device-day": size / devices,
            "ingest s": took, "samples/s": samples / took, "db MiB": db_bytes / 2**20,
            "health s": sum(pages["health"].values()), "errors s": sum(pages["errors"].values()),
            "versions s": sum(pages["versions"].values())}


def table(rows: list[dict[str, float]]) -> str:
    """The figures of every size, and below each its ratio to the smallest size."""
    base = rows[0]
    head = " | ".join(f"{c:>12}" for c in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(" | ".join(f"{r[c]:>12,.0f}" if r[c] >= 100 or c in ("devices", "samples") else f"{r[c]:>12,.3f}"
                                for c in COLUMNS))
        lines.append(" | ".join(f"{r[c] / base[c]:>11,.2f}x" if base[c] else f"{'':>12}" for c in COLUMNS))
    return "\n".join(lines)


def iter_sizes(text: str) -> Iterator[int]:
    """The --sizes list, smallest first."""
    try:
        sizes = sorted(int(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise SystemExit(f"--sizes takes device counts separated by commas, got {text!r}") from exc
    if not sizes:
        raise SystemExit(f"--sizes takes device counts separated by commas, got {text!r}")
    yield from sizes


def main(argv: list[str] | None = None) -> None:
    """Measure every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,4000,16000", help="device counts, multiples of 8")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="write the files and databases here and keep them (default: a temporary directory, "
                             "removed at the end)")
    args = parser.parse_args(argv)
    sizes = list(iter_sizes(args.sizes))
    tmp = args.keep if args.keep else Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        rows = []
        for devices in sizes:
            rows.append(measure(devices, tmp))
            if not args.keep:  # a day of 16k devices is tens of GB: keep one size on disk at a time
                shutil.rmtree(tmp / f"fleet-{devices}")
        print(table(rows), flush=True)
        largest = rows[-1]
        growth = (largest["health s"] / rows[0]["health s"]) / (largest["devices"] / rows[0]["devices"])
        report("peak memory", peak_rss_mib(), "MiB")
        met = largest["health s"] < TARGET_S and (len(rows) == 1 or growth <= 1.0)
        print(f"Fleet health at {largest['devices']:,.0f} devices: {largest['health s']:.2f} s "
              f"(target {TARGET_S:g} s); growth {growth:.2f} of the device count's: "
              f"{'target met' if met else 'TARGET MISSED'}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
