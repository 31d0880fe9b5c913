"""The compiled rules in a real Prometheus give the same canonical series as hetpool's own normalization.

Every shipped profile's exporter samples (the corpus, or the fixtures where the corpus has no exposition)
are served live on loopback, each file from a 127.0.0.x host of its own so that exporters without a node
label get a node of their own. A real Prometheus scrapes them and evaluates the rules every second; hetpool
scrapes the same endpoints into a real DuckDB file. The newest value of every gauge and counter series the
feed would serve, every histogram part, and every fatal error event must come out of Prometheus too, under
the same name and labels, with the same value, and nothing else may; so must every version.

Error events are compared over a history: one more exporter steps through error codes and counts (codes that
come and go, a counter that restarts) while hetpool ingests one scrape per step and Prometheus scrapes every
second. A reader of the recorded error series (increases of `accelerator_errors_total`, rises to 1 of
`accelerator_error_state`) must count, per device, class, severity and code, the events the store holds.
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app.cli import main
from canonical.feednames import (
    ERROR_STATE,
    ERRORS_SAMPLE,
    FEED_KINDS,
    VERSION_SAMPLE,
    family_name,
    feed_labels,
    sample_name,
)
from canonical.metrics import ERRORS_METRIC, METRICS
from collectors.pipeline import IngestOptions, ingest_scrapes
from normalizers import load_profiles
from normalizers.exposition import ExpositionParser
from normalizers.promrules import LabelPlacement, compile_rules
from normalizers.promrules.alerting import alert_name
from normalizers.series import format_number
from normalizers.textformat import render_series
from pool_registry import Assignment, Registry, load_registry
from store import Store, connect, save_registry
from store.feed import feed_read
from tests.conftest import FLEET
from tests.exporters import Exporter
from tests.promserver import PrometheusServer

pytestmark = pytest.mark.slow  # a real Prometheus evaluating the compiled rules

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "exposition"
# (file, profile, pool): at least one file per shipped profile; the corpus where it has exposition text
FILES = (
    ("corpus:dcgm/real_world_exposition_samples.prom", "dcgm", "h100-a"),
    ("fixture:dcgm_memory_xid.prom", "dcgm", "h100-a"),
    ("corpus:amd/real_world_exposition_samples.prom", "amd", "mi300x-a"),
    ("corpus:ascend/mind-cluster/collector_testdata_prometheus_metrics", "ascend", "ascend-a"),
    ("corpus:ascend/mind-cluster/docs_example_exposition.prom", "ascend", "ascend-a"),
    ("fixture:gaudi.prom", "gaudi", "gaudi3-a"),
    ("fixture:cambricon.prom", "cambricon", "mlu370-a"),
    ("corpus:serving/vllm/real_world_exposition_samples.prom", "vllm", "ascend-a"),
    ("corpus:serving/sglang/docs_references_production_metrics_example.prom", "sglang", "mi300x-a"),
    ("fixture:tgi.prom", "tgi", "gaudi3-a"),
    ("corpus:serving/triton/tensorrtllm_backend_readme_metrics_example.prom", "triton", "h100-a"),
    ("corpus:serving/triton/triton_docs_summary_example.prom", "triton", "h100-a"),
)
# Fatal and other error signals the files above lack: sticky codes seen for the first time, a counter, a
# class chosen by label, and codes of other severities that must raise nothing.
FAULTS = (
    ("dcgm", "h100-a", 'DCGM_FI_DEV_XID_ERRORS{gpu="1",Hostname="h100-a-fault"} 79\n'   # device_lost/fatal
                       'DCGM_FI_DEV_XID_ERRORS{gpu="2",Hostname="h100-a-fault"} 13\n'   # application/recoverable
                       'DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="3",Hostname="h100-a-fault"} 1\n'
                       'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",Hostname="h100-a-fault"} 2\n'),
    ("amd", "mi300x-a", 'gpu_afid_errors{gpu_id="0",hostname="mi300x-a-fault",severity="fatal",afid_index="0"} 30\n'
                        'gpu_afid_errors{gpu_id="1",hostname="mi300x-a-fault",severity="non_fatal_corrected",'
                        'afid_index="0"} 31\n'),
    ("ascend", "ascend-a", f'npu_chip_info_error_code{{id="0"}} {0x80E3A201}\n'       # SeparateNPU: device_lost/fatal
                           f'npu_chip_info_error_code_1{{id="1"}} {0x8C03A000}\n'     # RestartNPU: reset_required/fatal
                           f'npu_chip_info_error_code{{id="2"}} {0x80E21007}\n'),     # NotHandleFault: informational
)
# The history: per step, the error signals of three nodes in one body (one scrape, so Prometheus never sees half
# a step). PCIe replays of h100-a-hist's GPU 2 count the steps, so the test can tell when Prometheus has one.
XIDS = (0, 79, 79, 13, 0, 79, 5, 5, 0)       # 79 twice, 13 once and 5 (no XID of the table: "other") once
DBE = (0, 0, 2, 2, 5, 1, 1, 3, 3)            # 2 + 3, a restart counting 1, then 2: 8 events
REMAP = (0, 1, 1, 0, 1, 1, 1, 0, 0)          # a fixed code: 2 events
AFID = (0, 30, 30, 0, 30, 30, 0, 0, 30)      # class by label, code the value ("other" in PromQL): 3 events
NPU = (0, 0x80E3A201, 0x80E3A201, 0x8C03A000, 0x8C03A000, 0, 0x80E3A201, 0x80E3A201, 0)  # hex codes: 3 events
HIST_NODES = {"h100-a": "h100-a-hist", "mi300x-a": "mi300x-a-hist", "ascend-a": "ascend-a-hist"}


def history(k: int) -> str:
    """Step k of the history, as exporter text."""
    dcgm = 'Hostname="h100-a-hist",DCGM_FI_DRIVER_VERSION="550.163.01"'
    return (f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",{dcgm}}} {XIDS[k]}\n'
            f'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{gpu="1",{dcgm}}} {DBE[k]}\n'
            f'DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{gpu="2",{dcgm},DCGM_FI_DEV_VBIOS_VERSION="96.00.99.00.01"}} {k + 1}\n'
            f'DCGM_FI_DEV_ROW_REMAP_FAILURE{{gpu="3",{dcgm}}} {REMAP[k]}\n'
            f'gpu_afid_errors{{gpu_id="0",hostname="mi300x-a-hist",severity="fatal",afid_index="0",'
            f'driver_version="6.12.12"}} {AFID[k]}\n'
            f'npu_chip_info_error_code{{id="0",hostname="ascend-a-hist"}} {NPU[k]}\n')


Key = tuple[str, frozenset[tuple[str, str]]]
PROFILES = load_profiles()
T = TypeVar("T")


def exposition(path: Path) -> str:
    """The samples hetpool's parser reads from a file, as plain text without timestamps, first line of a
    series kept: the scrape time stamps them, for Prometheus and hetpool alike."""
    parser = ExpositionParser()
    batches = [parser.feed(path.read_bytes()), parser.finish()]
    lines: dict[str, str] = {}
    for batch in batches:
        for key, value in batch.samples.select("key", "value").iter_rows():
            name, labels = batch.series[str(key)]
            text = render_series(name, labels)
            lines.setdefault(text, f"{text} {_value(value)}\n")
    return "".join(lines.values())


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    return ("+Inf" if v > 0 else "-Inf") if math.isinf(v) else repr(v)


def nodes_of(text: str, profile: str) -> set[str]:
    """Node names the samples carry under the profile's node labels."""
    p = PROFILES.get(profile)
    parser = ExpositionParser()
    batch = parser.feed(text.encode())
    return {next(labels[k] for k in p.node_labels if labels.get(k)) for _, labels in batch.series.values()
            if any(labels.get(k) for k in p.node_labels)}


def placed(fleet: Registry, hosts: dict[str, set[str]]) -> Registry:
    """The example fleet, each pool claiming exactly the nodes and exporter hosts its files bring."""
    return replace(fleet, pools=tuple(replace(p, assign=Assignment(node_patterns=tuple(sorted(hosts[p.id]))))
                                      for p in fleet.pools if p.id in hosts))


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result vector."""
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def prom_series(url: str, names: list[str]) -> dict[Key, float]:
    """Every series of these names: name and labels (le as the store spells it) -> value."""
    return evaluated(url, '{__name__=~"' + "|".join(names) + '"}')


def evaluated(url: str, expr: str, name: str | None = None) -> dict[Key, float]:
    """An expression's series, named `name` (else by their own name), le spelled as the store does."""
    out = {}
    for item in query(url, expr):
        labels = dict(item["metric"])
        own = labels.pop("__name__", None)
        if "le" in labels:
            labels["le"] = format_number(float(labels["le"]))
        out[(name or own or "", frozenset(labels.items()))] = float(item["value"][1])
    return out


def present(labels: dict[str, str]) -> frozenset[tuple[str, str]]:
    """Labels as Prometheus keeps them: an empty label is no label."""
    return frozenset((k, v) for k, v in labels.items() if v)


def store_series(db: Path) -> dict[Key, float]:
    """What the feed serves but the error totals: gauges, counters, histogram parts and versions, as Prometheus
    would name them."""
    out = {}
    with connect(db) as con:
        read = feed_read(con, 10**12, None, errors=False)
    for row in read.rows:
        labels = feed_labels(row.pool, row.node, row.device, row.vendor, row.attributes, row.device_wide)
        if METRICS[row.metric].kind == "histogram":
            name = f"{family_name(row.metric)}_{labels.pop('stat')}"
        else:
            name = sample_name(row.metric)
        out[(name, present(labels))] = row.value
    for v in read.versions:
        labels = feed_labels(v.pool, v.node, v.device, v.vendor, {"component": v.component, "version": v.version})
        out[(VERSION_SAMPLE, present(labels))] = 1.0
    return out


def rules_code(vendor: str, code: str) -> str:
    """The code the rules give an event the store holds: a code no label or table of the vendor's profile can
    name is "other" (an incident's codes, joined by '+', each on its own)."""
    profile = next(p for p in PROFILES.profiles.values() if p.vendor == vendor and p.errors)
    named: set[str] = set()
    for spec in profile.errors.values():
        if spec.code_label is not None:
            return code
        named.update({spec.code} if spec.code is not None else {b.code for b in spec.bits.values()})
        if spec.by_label is None and spec.fixed is None:
            named.update(spec.format_code(int(k, 16 if spec.code_format == "hex" else 10)) for k in spec.codes)
    return "+".join(sorted({c if c in named else "other" for c in code.split("+")}))


def store_events(db: Path) -> dict[Key, float]:
    """The error totals the feed serves, under the codes the rules can give them."""
    out: dict[Key, float] = {}
    with connect(db) as con:
        read = feed_read(con, 10**12, None, ())
    for row in read.rows:
        assert row.metric == ERRORS_METRIC
        labels = feed_labels(row.pool, row.node, row.device, row.vendor, row.attributes)
        labels["code"] = rules_code(row.vendor, labels["code"])
        key = (ERRORS_SAMPLE, present(labels))
        out[key] = out.get(key, 0.0) + row.value
    return out


def counted(values: list[float], counter: bool) -> float:
    """Events in one recorded series' samples, read as a reader of the feed names does: a counter's increases
    (a drop is a restart, its new value the increase), or a state's rises to 1 (appearing at 1 is one)."""
    total, prev = 0.0, None
    for v in values:
        if counter:
            total += v if prev is None or v < prev else v - prev
        else:
            total += v == 1 and prev != 1
        prev = v
    return total


def prom_events(url: str) -> dict[Key, float]:
    """The events in every recorded error series' whole history, keyed as the store's totals."""
    out: dict[Key, float] = {}
    for name in (ERRORS_SAMPLE, ERROR_STATE):
        for item in query(url, f"{name}[1h]"):
            labels = dict(item["metric"])
            labels.pop("__name__", None)
            key = (ERRORS_SAMPLE, frozenset(labels.items()))
            n = counted([float(v) for _, v in item["values"]], name == ERRORS_SAMPLE)
            if n:
                out[key] = out.get(key, 0.0) + n
    return out


def store_fatal(db: Path) -> set[Key]:
    """The fatal error events, as the alerts they should raise: alert name and pool, node, device, class."""
    with connect(db) as con:
        rows = con.execute("SELECT pool, node, device, attributes FROM samples WHERE metric = ?",
                           [ERRORS_METRIC]).fetchall()
    out = set()
    for pool, node, device, attrs in rows:
        a = json.loads(attrs)
        if a["severity"] == "fatal":
            labels = {"pool": pool, "node": node, "device": device, "class": a["error_class"]}
            out.add((alert_name(a["error_class"]), frozenset((k, v) for k, v in labels.items() if v)))
    return out


def prom_alerts(url: str) -> set[Key]:
    out = set()
    for item in query(url, 'ALERTS{alertstate="firing"}'):
        m = dict(item["metric"])
        if m["alertname"].startswith("Hetpool"):  # the status rules' alerts (hetpool_status; tests/test_tsdb.py)
            continue
        assert m["severity"] == "fatal" and m["vendor"], m
        labels = {k: m[k] for k in ("pool", "node", "device", "class") if m.get(k)}
        out.add((m["alertname"], frozenset(labels.items())))
    return out


@pytest.fixture(scope="module")
def served(corpus: Path) -> Iterator[tuple[list[Exporter], Registry]]:
    """One live exporter per file on its own loopback host, and the fleet that places their nodes."""
    exporters: list[Exporter] = []
    hosts: dict[str, set[str]] = {}
    bodies = [(exposition((corpus if spec.startswith("corpus:") else FIXTURES) / spec.split(":", 1)[1]), profile,
               pool) for spec, profile, pool in FILES] + [(text, profile, pool) for profile, pool, text in FAULTS]
    for i, (text, profile, pool) in enumerate(bodies):
        exporter = Exporter(host=f"127.0.0.{10 + i}")
        exporter.bodies["/metrics"] = text.encode()
        exporters.append(exporter)
        mine = hosts.setdefault(pool, set())
        mine.update({exporter.host} | nodes_of(text, profile))
    stepped = Exporter(host=f"127.0.0.{10 + len(bodies)}")
    stepped.bodies["/metrics"] = history(0).encode()
    exporters.append(stepped)
    for pool, node in HIST_NODES.items():
        hosts[pool].add(node)
    hosts["h100-a"].add(stepped.host)
    claimed = [n for names in hosts.values() for n in names]
    assert len(claimed) == len(set(claimed)), "a node in two pools would be placed by neither"
    yield exporters, placed(load_registry(FLEET), hosts)
    for e in exporters:
        e.close()


@pytest.fixture(scope="module")
def both(served: tuple[list[Exporter], Registry], tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[Path, PrometheusServer]]:
    """The same scrape in DuckDB (through hetpool's scrape ingest) and in Prometheus (through the rules)."""
    exporters, fleet = served
    work = tmp_path_factory.mktemp("promrules")
    db = work / "hetpool.duckdb"
    with connect(db) as con:
        save_registry(con, fleet, "placed fleet")
    rules = work / "rules.yaml"
    assert main(["--db", str(db), "rules", "--out", str(rules)]) == 0
    store = Store(db)
    for e in exporters[:-1]:
        ingest_scrapes(store, e.url("/metrics"), IngestOptions())
    targets = tuple(e.url("").removeprefix("http://") for e in exporters)
    prom = PrometheusServer(work, None, targets, interval="1s", rules=rules).start()
    try:
        step_through(exporters[-1], store, prom)
        yield db, prom
    finally:
        prom.stop()


def step_through(exporter: Exporter, store: Store, prom: PrometheusServer) -> None:
    """Serve each step of the history; hetpool scrapes it once, and Prometheus has it in its recorded series
    (two evaluations more, so every rule of the group has seen the same scrape) before the next step."""
    marker = f'{ERRORS_SAMPLE}{{node="{HIST_NODES["h100-a"]}",device="2"}}'
    for k in range(len(XIDS)):
        exporter.bodies["/metrics"] = history(k).encode()
        ingest_scrapes(store, exporter.url("/metrics"), IngestOptions())
        seen = settle(lambda: [float(r["value"][1]) for r in query(prom.url, marker)], [float(k + 1)])
        assert seen == [float(k + 1)], (k, seen)
        time.sleep(2.5)


def settle(read: Callable[[], T], want: T, seconds: float = 45.0) -> T:
    """Read until the answer equals `want` (rules need a scrape and an evaluation or two), or time runs out."""
    deadline = time.monotonic() + seconds
    got = read()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.5)
        got = read()
    return got


def test_every_canonical_series_equals_the_store(both: tuple[Path, PrometheusServer]) -> None:
    db, prom = both
    want = store_series(db)
    assert {profile for _, profile, _ in FILES} == set(PROFILES.profiles)
    vendors = {dict(labels).get("vendor") for _, labels in want}
    assert vendors >= {"nvidia", "amd", "huawei", "intel", "cambricon"}, vendors
    assert (VERSION_SAMPLE, present({"pool": "h100-a", "node": "h100-a-hist", "vendor": "nvidia", "device": "2",
                                     "component": "vbios", "version": "96.00.99.00.01"})) in want
    assert {dict(labels)["component"] for name, labels in want if name == VERSION_SAMPLE} >= {"driver", "vbios"}
    names = sorted({name for name, _ in want} | {sample_name(m) for m, c in METRICS.items() if c.kind in FEED_KINDS}
                   | {VERSION_SAMPLE})
    got = settle(lambda: set(prom_series(prom.url, names)), set(want))
    assert got == set(want), {"only in prometheus": sorted(map(str, got - set(want))),
                              "only in the store": sorted(map(str, set(want) - got))}
    values = prom_series(prom.url, names)
    wrong = {str(k): (values[k], v) for k, v in want.items() if not math.isclose(values[k], v, rel_tol=1e-12)}
    assert not wrong


def test_every_error_event_is_counted_alike(both: tuple[Path, PrometheusServer]) -> None:
    """Per device, class, severity and code, the recorded series over the whole history hold the store's events."""
    db, prom = both
    want = store_events(db)
    hist = {k: v for k, v in want.items() if dict(k[1])["node"] in HIST_NODES.values()}
    fatal = {"severity": "fatal"}
    nv = {"pool": "h100-a", "node": "h100-a-hist", "vendor": "nvidia"}
    assert hist == {  # the history's events by hand
        (ERRORS_SAMPLE, present({**nv, "device": "0", "error_class": "device_lost", **fatal, "code": "79"})): 2.0,
        (ERRORS_SAMPLE, present({**nv, "device": "0", "error_class": "application", "severity": "recoverable",
                                 "code": "13"})): 1.0,
        (ERRORS_SAMPLE, present({**nv, "device": "0", "error_class": "unknown", "severity": "recoverable",
                                 "code": "other"})): 1.0,
        (ERRORS_SAMPLE, present({**nv, "device": "1", "error_class": "memory_uncorrectable", **fatal,
                                 "code": "ecc_dbe_volatile"})): 8.0,
        (ERRORS_SAMPLE, present({**nv, "device": "2", "error_class": "interconnect", "severity": "informational",
                                 "code": "pcie_replay"})): float(len(XIDS)),
        (ERRORS_SAMPLE, present({**nv, "device": "3", "error_class": "row_remap_failure", **fatal,
                                 "code": "row_remap_failure"})): 2.0,
        (ERRORS_SAMPLE, present({"pool": "mi300x-a", "node": "mi300x-a-hist", "vendor": "amd", "device": "0",
                                 "error_class": "memory_uncorrectable", **fatal, "code": "other"})): 3.0,
        (ERRORS_SAMPLE, present({"pool": "ascend-a", "node": "ascend-a-hist", "vendor": "huawei", "device": "0",
                                 "error_class": "device_lost", **fatal, "code": "80E3A201"})): 2.0,
        (ERRORS_SAMPLE, present({"pool": "ascend-a", "node": "ascend-a-hist", "vendor": "huawei", "device": "0",
                                 "error_class": "reset_required", **fatal, "code": "8C03A000"})): 1.0,
    }
    assert len(want) > len(hist)  # the other exporters' errors, each seen once
    got = prom_events(prom.url)
    assert got == want, {"only in prometheus": sorted(map(str, set(got) - set(want))),
                         "only in the store": sorted(map(str, set(want) - set(got))),
                         "counted otherwise": sorted(str((k, got[k], want[k])) for k in set(got) & set(want)
                                                     if got[k] != want[k])}


def test_every_fatal_error_event_raises_its_alert(both: tuple[Path, PrometheusServer]) -> None:
    db, prom = both
    # of the history, what still fires at its end: the counter that rose and the code changed to at the last step
    want = {k for k in store_fatal(db) if dict(k[1])["node"] not in HIST_NODES.values()} | {
        ("AcceleratorMemoryUncorrectableFatal", present({"pool": "h100-a", "node": "h100-a-hist", "device": "1",
                                                         "class": "memory_uncorrectable"})),
        ("AcceleratorMemoryUncorrectableFatal", present({"pool": "mi300x-a", "node": "mi300x-a-hist", "device": "0",
                                                         "class": "memory_uncorrectable"}))}
    assert {dict(labels)["class"] for _, labels in want} >= {"device_lost", "reset_required", "row_remap_failure",
                                                             "memory_uncorrectable"}, want
    got = settle(lambda: prom_alerts(prom.url), want)
    assert got == want, {"only in prometheus": sorted(map(str, got - want)),
                         "only in the store": sorted(map(str, want - got))}



def test_a_pool_label_places_the_same_series(both: tuple[Path, PrometheusServer],
                                             served: tuple[list[Exporter], Registry]) -> None:
    """With --pool-label, Prometheus' own job label as the pool here: the same series, in that pool, with the
    vendor of the registry pool of that name."""
    db, prom = both
    fleet = served[1]
    named = replace(fleet, pools=(replace(fleet.pools[0], id="exporter"),))  # the job of every scraped target
    vendor = fleet.chip_of(fleet.pools[0]).vendor
    rules = compile_rules(PROFILES.profiles.values(), LabelPlacement("job", named))
    assert [g["name"] for g in rules.groups] == ["hetpool_canonical", "hetpool_alerts"]
    want = {(name, frozenset({**dict(labels), "pool": "exporter", "vendor": vendor}.items())): value
            for (name, labels), value in store_series(db).items()}

    def read() -> dict[Key, float]:
        out: dict[Key, float] = {}
        for rule in rules.groups[0]["rules"]:
            if rule["record"] not in (ERRORS_SAMPLE, ERROR_STATE):  # error series: counted over the history above
                out.update(evaluated(prom.url, rule["expr"], rule["record"]))
        return out

    got = settle(lambda: set(read()), set(want))
    assert got == set(want), {"only in prometheus": sorted(map(str, got - set(want))),
                              "only in the store": sorted(map(str, set(want) - got))}
    values = read()
    assert not {str(k): (values[k], v) for k, v in want.items() if not math.isclose(values[k], v, rel_tol=1e-12)}
