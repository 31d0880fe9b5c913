"""Build the demo database through the real pipeline: registry, exposition text per node and day, traffic CSV.

Nothing here writes canonical rows. For each node and slice of time, the text its exporters would have
served (every scrape, each sample with its timestamp: the accelerator exporter and any serving engine on
the node) goes through `collectors.pipeline.ingest_exposition` as one file of scrapes; the requests go
through the project's CSV traffic format and `store.requests.add_requests`, as `hetpool ingest traffic`
does them.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from app.demo.dialects import EngineSlice, NodeSlice, device_dialect, engine_dialect
from app.demo.exceptions import DemoError
from app.demo.onboarding import plant_onboarding
from app.demo.story import (
    DAY_MS,
    HOUR_MS,
    PoolLayout,
    Signals,
    device_signals,
    drift_step,
    drifted_driver,
    exporter_upgraded,
    layout,
    scale_registry,
    upgrade_step,
)
from app.demo.traffic import TRACE, EngineSeries, Served, engine_series, serve
from collectors.pipeline import IngestOptions, ingest_exposition, make_context
from collectors.traffic import ingest_traffic
from onboarding.files import registry_files, store_files
from pool_registry import Registry
from store import Access, save_registry
from traces import FORMATS, ParseOptions

Progress = Callable[[float, str], None]
# shares of the progress bar: the story (device signals, serving the requests, engine counters), then the
# exporters' text, then the requests; within the story, the first device signals and the engine counters
STORY_SHARE, REQUESTS_SHARE = 0.45, 0.2  # as a 2-day build of 32-device pools spent its time
SIGNALS_SHARE, PLAN_SHARE = 0.05, 0.1
REQUESTS_PER_RUN = 100_000
CHUNK_MS = 2 * HOUR_MS  # of a node's scrapes rendered and read as one chunk of its run


@dataclass(frozen=True)
class DemoSpec:
    """Size and shape of the demo: window end and length, fleet size, scrape interval, seed, slice length."""

    end_ms: int
    days: float = 2.0
    devices_per_pool: int = 8
    interval_ms: int = 30_000
    seed: int = 7
    slice_hours: int = 24

    def __post_init__(self) -> None:
        if not 0 < self.days <= 31:
            raise DemoError(f"--days {self.days:g} is out of range; expected more than 0 and at most 31")
        if not 1 <= self.devices_per_pool <= 256:
            raise DemoError(f"--devices-per-pool {self.devices_per_pool} is out of range; expected 1 to 256")
        if not 1000 <= self.interval_ms <= 10 * 60_000 or HOUR_MS % self.interval_ms:
            raise DemoError(f"--interval {self.interval_ms / 1000:g}s must divide an hour and lie between 1s and 10m")

    @property
    def start_ms(self) -> int:
        """First instant of the window (whole minutes)."""
        start = self.end_ms - int(self.days * DAY_MS)
        return start - start % 60_000


@dataclass(frozen=True)
class DemoReport:
    """What the build stored."""

    start_ms: int
    end_ms: int
    pools: int
    devices: int
    runs: int
    read: int
    stored: int
    rejected: int
    requests: int
    seconds: float
    rows: int = 0  # canonical rows stored (a derived row, such as a memory total, stands for several records)
    exposition_bytes: int = 0  # the exporters' text ingested


@dataclass(frozen=True)
class NodePlan:
    """One node: its pool, index in the pool, phase of its scrapes, and the serving engines it hosts."""

    lay: PoolLayout
    index: int
    offset_ms: int
    engines: tuple[EngineSeries, ...]

    @property
    def name(self) -> str:
        """The node's host name."""
        return self.lay.nodes[self.index]


def plan_nodes(layouts: list[PoolLayout], served: Served, grid: np.ndarray, interval_ms: int,
               progress: Progress | None = None) -> list[NodePlan]:
    """Every node that reports, with its engines' counters computed on its own scrape grid."""
    say = progress or (lambda _f, _m: None)
    total = sum(len(lay.nodes) for lay in layouts)
    out = []
    number = 0
    for lay in layouts:
        serving = lay.pool.serving
        for index, node in enumerate(lay.nodes):
            say(number / total, f"engine counters of {node}")
            offset = (number * 1_000) % interval_ms  # a scrape pool spreads its targets over the interval
            number += 1
            engines: list[EngineSeries] = []
            if serving is not None and lay.serving:
                dialect = engine_dialect(serving.engine)
                for r in range(serving.replicas):
                    if r * serving.devices_per_replica // lay.devices_per_node == index:
                        engines.append(engine_series(lay, served, r, grid + offset, dialect.ttft_bounds,
                                                     dialect.e2e_bounds))
            if node in lay.reporting_nodes:
                out.append(NodePlan(lay, index, offset, tuple(engines)))
    return out


def node_text(plan: NodePlan, sig: Signals, grid: np.ndarray, k0: int, k1: int, spec: DemoSpec) -> str:
    """What the node's exporters served during steps [k0, k1): the accelerator exporter, then each engine."""
    lay = plan.lay
    ts = grid[k0:k1] + plan.offset_ms
    cols = slice(plan.index * lay.devices_per_node, (plan.index + 1) * lay.devices_per_node)
    cut = Signals(**{f.name: _cut(getattr(sig, f.name), k0, k1, cols) for f in dataclasses.fields(Signals)})
    parts = []
    if cut.present.any():
        driver = drifted_driver(lay, plan.index, k0, len(grid))
        upgraded = exporter_upgraded(lay, plan.index, k0, len(grid))
        parts.append(device_dialect(lay.pool.exporter).render(NodeSlice(lay, plan.name, plan.index, ts, cut, driver,
                                                                        upgraded)))
    serving = lay.pool.serving
    for eng in plan.engines:
        assert serving is not None
        parts.append(engine_dialect(serving.engine).render(_engine_slice(lay, eng, plan.name, ts, k0, k1)))
    return "".join(parts)


def node_chunks(plan: NodePlan, sig: Signals, grid: np.ndarray, k0: int, k1: int, spec: DemoSpec
                ) -> NodeChunks | None:
    """The node's text for steps [k0, k1), rendered a chunk at a time as the ingest reads it; None when the node
    served nothing then (its devices not yet deployed and no engine)."""
    cols = slice(plan.index * plan.lay.devices_per_node, (plan.index + 1) * plan.lay.devices_per_node)
    if not plan.engines and not sig.present[k0:k1, cols].any():
        return None
    return NodeChunks(plan, sig, grid, k0, k1, spec)


@dataclass
class NodeChunks:
    """A node's exporter text over steps [k0, k1) as byte chunks of CHUNK_MS of scrapes, each rendered when the
    ingest asks for it: one batch of the run each, so neither the text nor its parsed samples are held for the
    whole slice (a day of a node of 8 devices is about 80 MB of text). Counts the bytes it gave."""

    plan: NodePlan
    sig: Signals
    grid: np.ndarray
    k0: int
    k1: int
    spec: DemoSpec
    size: int = 0

    def __call__(self) -> Iterator[bytes]:
        """The chunks, from the first again (a run staged again reads its source again)."""
        self.size = 0
        steps = max(1, CHUNK_MS // self.spec.interval_ms)
        for a in range(self.k0, self.k1, steps):
            text = node_text(self.plan, self.sig, self.grid, a, min(self.k1, a + steps), self.spec)
            if text:
                data = text.encode()
                self.size += len(data)
                yield data


def _cut(values: np.ndarray, k0: int, k1: int, cols: slice) -> np.ndarray:
    return values[k0:k1, cols] if values.ndim == 2 else values[k0:k1]


def _engine_slice(lay: PoolLayout, eng: EngineSeries, node: str, ts: np.ndarray, k0: int, k1: int) -> EngineSlice:
    assert lay.pool.serving is not None
    cut = slice(k0, k1)
    return EngineSlice(
        lay=lay, node=node, engine=eng.replica, model=lay.pool.serving.model, ts_ms=ts,
        running=eng.running[cut], waiting=eng.waiting[cut], kv_usage=eng.kv_usage[cut],
        prompt_tokens=eng.prompt_tokens[cut], generation_tokens=eng.generation_tokens[cut],
        finished={r: v[cut] for r, v in eng.finished.items()},
        ttft=(eng.ttft[0][cut], eng.ttft[1][cut], eng.ttft[2][cut]),
        e2e=(eng.e2e[0][cut], eng.e2e[1][cut], eng.e2e[2][cut]))


def demo_fleet(registry: Registry, spec: DemoSpec, source: str) -> Registry:
    """The registry scaled to the demo's size, its onboarding pool's dates moved into the demo's window."""
    return plant_onboarding(scale_registry(registry, spec.devices_per_pool), spec.end_ms, Path(source).parent)


def draw_story(layouts: list[PoolLayout], spec: DemoSpec, grid: np.ndarray, say: Progress
               ) -> tuple[dict[str, Signals], Served, list[NodePlan]]:
    """Every pool's device signals, the requests served on them, and the nodes' plans, telling `say` of each step."""
    rng = np.random.default_rng(spec.seed)
    signals = {}
    for i, lay in enumerate(layouts):
        say(SIGNALS_SHARE * i / len(layouts), f"drawing {lay.pool.id}'s devices")
        signals[lay.pool.id] = device_signals(lay, grid, spec.interval_ms, rng)
    served = serve(layouts, signals, grid, spec.interval_ms, spec.start_ms, spec.end_ms, rng,
                   _part(say, SIGNALS_SHARE, 1 - PLAN_SHARE))
    return signals, served, plan_nodes(layouts, served, grid, spec.interval_ms, _part(say, 1 - PLAN_SHARE, 1.0))


def _part(say: Progress, lo: float, hi: float) -> Progress:
    """Progress of a step that takes the share [lo, hi] of its caller's."""
    return lambda fraction, what: say(lo + (hi - lo) * fraction, what)


def build_demo(store: Access, registry: Registry, spec: DemoSpec, source: str,
               progress: Progress | None = None, fleet: Registry | None = None,
               fleet_file: Path | None = None) -> DemoReport:
    """Store the scaled registry, then ingest every node's exporter text, slice by slice, and the traffic. With
    `fleet` (the scaled registry as `fleet_file` holds it, evidence paths relative to that file), that is the
    registry stored, so loading the file again stores nothing new."""
    began = time.perf_counter()
    say = progress or (lambda _f, _m: None)
    say(0.0, "storing the fleet")
    fleet = fleet or demo_fleet(registry, spec, source)
    evidence = registry_files(fleet, fleet_file.parent if fleet_file else Path(source).parent)
    with store.write("hetpool demo") as con:
        save_registry(con, fleet, str(fleet_file) if fleet_file else
                      f"{source} (demo: {spec.devices_per_pool} devices per pool)")
        store_files(con, evidence, "registry")
    layouts = layout(fleet)
    grid = np.arange(spec.start_ms, spec.end_ms, spec.interval_ms, dtype=np.int64)
    signals, served, nodes = draw_story(layouts, spec, grid, _part(say, 0.0, STORY_SHARE))
    ctx = make_context(store, IngestOptions())

    def clock() -> float:  # no wall clock in the data: "now" is the window's end
        return spec.end_ms / 1000

    per_slice = max(1, spec.slice_hours * HOUR_MS // spec.interval_ms)
    # slices end at whole slice lengths and where the drifted drivers and the upgraded exporter change, so labels
    # hold per slice
    cuts = sorted({*range(0, len(grid), per_slice), drift_step(len(grid)), upgrade_step(len(grid)), len(grid)}
                  - {len(grid)})
    bounds = list(zip(cuts, [*cuts[1:], len(grid)], strict=True))
    exposition = _part(say, STORY_SHARE, 1 - REQUESTS_SHARE)
    total, done = max(1, len(bounds) * len(nodes)), 0
    runs = read = stored = rejected = rows = size = 0
    for part, (k0, k1) in enumerate(bounds, start=1):
        for plan in nodes:
            exposition(done / total, f"{plan.name}'s exporters, part {part} of {len(bounds)}")
            chunks = node_chunks(plan, signals[plan.lay.pool.id], grid, k0, k1, spec)
            done += 1
            if chunks is not None:
                report = ingest_exposition(store, chunks, kind="demo", source=f"demo {plan.name}",
                                           options=IngestOptions(node=plan.name), clock=clock,
                                           context=dataclasses.replace(ctx, node=plan.name))
                size += chunks.size
                runs += 1
                read, stored = read + report.counts.read, stored + report.counts.stored
                rejected += report.counts.rejected
                rows += report.rows
    del signals, nodes
    requests, traffic_runs = ingest_requests(store, served.frame, f"{source} (demo traffic)",
                                             _part(say, 1 - REQUESTS_SHARE, 1.0))
    say(1.0, "requests")
    return DemoReport(spec.start_ms, spec.end_ms, len(layouts), sum(lay.pool.devices for lay in layouts),
                      runs + traffic_runs, read, stored, rejected, requests, time.perf_counter() - began, rows,
                      size)


def ingest_requests(store: Access, frame: pl.DataFrame, source: str, progress: Progress | None = None,
                    rows_per_run: int = REQUESTS_PER_RUN) -> tuple[int, int]:
    """Write the requests as the project's traffic CSV and ingest it the way `hetpool ingest traffic` does.

    A part of `rows_per_run` requests at a time, each its own run, its rows numbered on from the parts before
    it as one file would number them (so the stored sequence numbers are the same): the traffic parser keeps
    about 1 KiB per row while it reads. Returns the requests stored and the runs.
    """
    say = progress or (lambda _f, _m: None)
    stored = runs = 0
    for offset in range(0, frame.height, rows_per_run):
        say(offset / frame.height, f"requests {offset:,} of {frame.height:,}")
        buf = io.BytesIO()
        frame.slice(offset, rows_per_run).write_csv(buf)
        parsed = FORMATS["csv"].parse(buf.getvalue(), ParseOptions())
        del buf
        parsed = dataclasses.replace(parsed, frame=parsed.frame.with_columns(pl.col("seq") + offset))
        stored += ingest_traffic(store, parsed, trace=TRACE, source=source).counts.stored
        runs += 1
    return stored, runs
