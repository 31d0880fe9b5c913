"""The serve YAML: the shipped example loads, and every mistake is named with its line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.serve.config import (
    AlertmanagerPlan,
    ExportPlan,
    FeedListener,
    ServeConfigError,
    load_serve_config,
    load_serve_text,
)
from collectors.service import DropFolder, PrometheusPull, ScrapeTarget
from tests.conftest import REPO


def test_the_example_is_a_working_config_for_the_demo() -> None:
    cfg = load_serve_config(REPO / "examples" / "serve.yaml")
    assert cfg.database == REPO / "demo" / "hetpool.duckdb"  # relative to the file, as make demo writes it
    assert (cfg.console.port, cfg.health.port) == (8511, 8512)
    (drop,) = cfg.collectors
    assert isinstance(drop, DropFolder) and drop.path == REPO / "demo" / "drop" and drop.every_s == 10
    assert cfg.export == ExportPlan(REPO / "demo" / "lake", 3600.0)
    assert cfg.feed == FeedListener(True, "127.0.0.1", 9464, 300_000)


def test_export_and_feed_sections(tmp_path: Path) -> None:
    cfg = load_serve_text("""
collectors: [{name: drop, kind: folder, path: in}]
export: {out: lake, every: 10m, pools: [h100-a, mi300x-a], metrics: [accelerator.power]}
feed: {address: 0.0.0.0, port: 9470, window: 2m}
""", "serve.yaml", tmp_path)
    assert cfg.export == ExportPlan(tmp_path / "lake", 600.0, ("h100-a", "mi300x-a"), ("accelerator.power",))
    assert cfg.feed == FeedListener(True, "0.0.0.0", 9470, 120_000)
    bare = load_serve_text("collectors: [{name: drop, kind: folder, path: in}]\nfeed: {enabled: false}\n",
                           "serve.yaml", tmp_path)
    assert bare.export is None and not bare.feed.enabled
    assert not load_serve_text("collectors: [{name: drop, kind: folder, path: in}]\n", "s.yaml").feed.enabled


def test_the_alertmanager_section(tmp_path: Path) -> None:
    cfg = load_serve_text(f"{FOLDER}console: {{port: 8600}}\nalertmanager: {{url: 'http://am:9093/', every: 30s}}\n",
                          "serve.yaml", tmp_path)
    assert cfg.alertmanager == AlertmanagerPlan("http://am:9093", 30.0, "http://127.0.0.1:8600")
    assert cfg.alertmanager is not None and cfg.alertmanager.hold_s == 120  # four runs
    own = load_serve_text(f"{FOLDER}console: {{enabled: false}}\nalertmanager: {{url: 'https://am', console_url: "
                          "'https://hetpool.example/', timeout: 3s}\n", "serve.yaml", tmp_path).alertmanager
    assert own == AlertmanagerPlan("https://am", 60.0, "https://hetpool.example", 3.0)
    assert load_serve_text(FOLDER, "serve.yaml", tmp_path).alertmanager is None


def test_every_kind_with_its_fields(tmp_path: Path) -> None:
    cfg = load_serve_text("""
collectors:
  - {name: prom, kind: prometheus, url: "http://p:9090", every: 30s, since: 6h, profiles: [dcgm], chunk: 30m}
  - {name: node, kind: scrape, url: "http://h100-a-01:9400/metrics", every: 5s, node: h100-a-01, pool: h100-a}
  - {name: drop, kind: folder, path: in, max_lag: 1h, profiles_dir: [profiles]}
console: {enabled: false}
""", "serve.yaml", tmp_path)
    prom, node, drop = cfg.collectors
    assert isinstance(prom, PrometheusPull) and (prom.every_s, prom.since_ms, prom.chunk_ms, prom.profiles) == (
        30.0, 6 * 3_600_000, 1_800_000, ("dcgm",))
    assert prom.max_lag_s == 4 * 30 + 30
    assert isinstance(node, ScrapeTarget) and (node.every_s, node.max_lag_s, node.node) == (5.0, 30.0, "h100-a-01")
    assert isinstance(drop, DropFolder) and drop.path == tmp_path / "in" and drop.max_lag_s == 3600
    assert drop.profiles_dirs == (tmp_path / "profiles",)
    assert not cfg.console.enabled and cfg.health.enabled and cfg.database is None


def test_canonical_collectors(tmp_path: Path) -> None:
    cfg = load_serve_text("""
collectors:
  - {name: rules, kind: prometheus, url: "http://p:9090", every: 1m, canonical: true}
  - {name: edge, kind: scrape, url: "http://edge:9464/metrics", canonical: true}
  - {name: raw, kind: prometheus, url: "http://p:9090"}
""", "serve.yaml", tmp_path)
    rules, edge, raw = cfg.collectors
    assert isinstance(rules, PrometheusPull) and rules.canonical and rules.every_s == 60.0
    assert rules.describe() == "canonical pull from http://p:9090"
    assert isinstance(edge, ScrapeTarget) and edge.canonical and edge.describe() == (
        "canonical scrape of http://edge:9464/metrics")
    assert isinstance(raw, PrometheusPull) and not raw.canonical


FOLDER = "collectors:\n  - {name: a, kind: folder, path: x}\n"
BAD = [
    ("", "serve.yaml: empty file; expected a mapping with 'collectors'"),
    ("collectors: []\n", "serve.yaml:1: collectors: expected at least one collector"),
    ("collectors:\n  - {name: a, kind: pull, url: x}\n",
     "serve.yaml:2: collectors[0].kind: unknown value 'pull'; expected one of: prometheus, scrape, folder"),
    ("collectors:\n  - {kind: scrape, url: 'http://h:1/m'}\n", "serve.yaml:2: collectors[0].name: missing required"),
    ("collectors:\n  - {name: a, kind: scrape}\n",
     "serve.yaml:2: collectors[0].url: missing required field of a scrape collector"),
    ("collectors:\n  - {name: a, kind: folder, path: x, url: 'http://h:1/m'}\n",
     "serve.yaml:2: collectors[0].url: 'url' is not a field of a folder collector"),
    ("collectors:\n  - {name: a, kind: scrape, url: 'h:1/m'}\n",
     "serve.yaml:2: collectors[0].url: bad URL 'h:1/m'; expected http(s)://host:port/..."),
    ("collectors:\n  - {name: a, kind: prometheus, url: 'http://me:secret@p:9090'}\n",
     "serve.yaml:2: collectors[0].url: credentials do not belong in the URL"),
    ("collectors:\n  - {name: a, kind: scrape, url: 'http://h:1/m', every: 15}\n",
     "serve.yaml:2: collectors[0].every: bad duration '15'; expected a number with a unit"),
    ("collectors:\n  - {name: a, kind: folder, path: x}\n  - {name: a, kind: folder, path: y}\n",
     "serve.yaml:3: collectors[1].name: duplicate collector name 'a' (also collectors[0])"),
    ("collectors:\n  - {name: a, kind: folder, path: x}\nhealth: {port: 8501}\n",
     "serve.yaml:3: health.port: port 8501 is already the console's"),
    ("collectors:\n  - {name: a, kind: folder, path: x}\nconsole: {port: 99999}\n",
     "serve.yaml:3: console.port: must be <= 65535, got 99999"),
    ("collectors:\n  - {name: a, kind: folder, path: x}\ncolectors: []\n",
     "serve.yaml:3: colectors: unknown key 'colectors'; did you mean 'collectors'?"),
    ("collectors: [\n", "serve.yaml:2: YAML syntax error"),
    (f"{FOLDER}feed: {{port: 9464, token: s3cret}}\n",
     "serve.yaml:3: feed.token: the feed's token does not belong in this file; set HETPOOL_FEED_TOKEN"),
    (f"{FOLDER}health: {{port: 9464}}\nfeed: {{port: 9464}}\n",
     "serve.yaml:4: feed.port: port 9464 is already the health endpoint's"),
    (f"{FOLDER}feed: {{port: 8501}}\n", "serve.yaml:3: feed.port: port 8501 is already the console's"),
    (f"{FOLDER}feed: {{prt: 9464}}\n", "serve.yaml:3: feed.prt: unknown key 'prt'; did you mean 'port'?"),
    (f"{FOLDER}feed: {{window: soon}}\n", "serve.yaml:3: feed.window: bad duration 'soon'"),
    (f"{FOLDER}export: {{every: 1h}}\n", "serve.yaml:3: export.out: missing required field"),
    (f"{FOLDER}export: {{out: lake, every: 1}}\n", "serve.yaml:3: export.every: bad duration '1'"),
    (f"{FOLDER}export: {{out: lake, metrics: [accelerator.pwr]}}\n",
     "serve.yaml:3: export.metrics[0]: unknown metric 'accelerator.pwr'; known: accelerator.clock"),
    (f"{FOLDER}export: lake\n", "serve.yaml:3: export: expected a mapping, got"),
    (f"{FOLDER}alertmanager: {{url: 'http://am:9093', token: s3cret}}\n",
     "serve.yaml:3: alertmanager.token: Alertmanager's credentials do not belong in this file; set "
     "HETPOOL_ALERTMANAGER_TOKEN"),
    (f"{FOLDER}alertmanager: {{url: 'http://ops:pw@am:9093'}}\n",
     "serve.yaml:3: alertmanager.url: Alertmanager's credentials do not belong in the URL"),
    (f"{FOLDER}alertmanager: {{every: 1m}}\n", "serve.yaml:3: alertmanager.url: missing required field"),
    (f"{FOLDER}alertmanager: {{url: 'am:9093'}}\n", "serve.yaml:3: alertmanager.url: bad URL 'am:9093'"),
    (f"{FOLDER}alertmanager: {{url: 'http://am:9093', every: 60}}\n",
     "serve.yaml:3: alertmanager.every: bad duration '60'"),
    ("collectors:\n  - {name: a, kind: prometheus, url: 'http://p:9090', canonical: true, profiles: [dcgm]}\n",
     "serve.yaml:2: collectors[0].profiles: 'profiles' does not apply with canonical: true; canonical series name "
     "their pool and node and need no profile"),
    ("collectors:\n  - {name: a, kind: scrape, url: 'http://h:1/m', canonical: true, node: n1}\n",
     "serve.yaml:2: collectors[0].node: 'node' does not apply with canonical: true"),
    ("collectors:\n  - {name: a, kind: folder, path: x, canonical: true}\n",
     "serve.yaml:2: collectors[0].canonical: 'canonical' is not a field of a folder collector"),
    ("collectors:\n  - {name: a, kind: scrape, url: 'http://h:1/m', canonical: maybe}\n",
     "serve.yaml:2: collectors[0].canonical:"),
    (f"{FOLDER}alertmanager: {{url: 'http://am:9093', console_url: console}}\n",
     "serve.yaml:3: alertmanager.console_url: bad URL 'console'"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_files_name_line_field_and_what_was_expected(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ServeConfigError) as info:
        load_serve_text(text, "serve.yaml", tmp_path)
    assert any(message in str(p) for p in info.value.problems), [str(p) for p in info.value.problems]


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ServeConfigError, match=r"none\.yaml: file not found"):
        load_serve_config(tmp_path / "none.yaml")
