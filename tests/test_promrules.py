"""The compiled rules in a real Prometheus give the same canonical series as hetpool's own normalization.

Every shipped profile's exporter samples (the corpus, or the fixtures where the corpus has no exposition)
are served live on loopback, each file from a 127.0.0.x host of its own so that exporters without a node
label get a node of their own. A real Prometheus scrapes them and evaluates the rules every second; hetpool
scrapes the same endpoints into a real DuckDB file. The newest value of every gauge and counter series the
feed would serve, every histogram part, and every fatal error event must come out of Prometheus too, under
the same name and labels, with the same value, and nothing else may.
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
from canonical.feednames import FEED_KINDS, family_name, feed_labels, sample_name
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
from store.feed import latest_values
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


def store_series(db: Path) -> dict[Key, float]:
    """What the feed serves, plus every histogram part, as Prometheus would name them (empty labels absent)."""
    out = {}
    with connect(db) as con:
        rows = latest_values(con, 10**12, (*FEED_KINDS, "histogram"))
    for row in rows:
        labels = feed_labels(row.pool, row.node, row.device, row.vendor, row.attributes)
        if METRICS[row.metric].kind == "histogram":
            name = f"{family_name(row.metric)}_{labels.pop('stat')}"
        else:
            name = sample_name(row.metric)
        out[(name, frozenset((k, v) for k, v in labels.items() if v))] = row.value
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
    for e in exporters:
        ingest_scrapes(store, e.url("/metrics"), IngestOptions())
    targets = tuple(e.url("").removeprefix("http://") for e in exporters)
    prom = PrometheusServer(work, None, targets, interval="1s", rules=rules).start()
    yield db, prom
    prom.stop()


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
    names = sorted({name for name, _ in want} | {sample_name(m) for m, c in METRICS.items() if c.kind in FEED_KINDS})
    got = settle(lambda: set(prom_series(prom.url, names)), set(want))
    assert got == set(want), {"only in prometheus": sorted(map(str, got - set(want))),
                              "only in the store": sorted(map(str, set(want) - got))}
    values = prom_series(prom.url, names)
    wrong = {str(k): (values[k], v) for k, v in want.items() if not math.isclose(values[k], v, rel_tol=1e-12)}
    assert not wrong


def test_every_fatal_error_event_raises_its_alert(both: tuple[Path, PrometheusServer]) -> None:
    db, prom = both
    want = store_fatal(db)
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
            out.update(evaluated(prom.url, rule["expr"], rule["record"]))
        return out

    got = settle(lambda: set(read()), set(want))
    assert got == set(want), {"only in prometheus": sorted(map(str, got - set(want))),
                              "only in the store": sorted(map(str, set(want) - got))}
    values = read()
    assert not {str(k): (values[k], v) for k, v in want.items() if not math.isclose(values[k], v, rel_tol=1e-12)}
