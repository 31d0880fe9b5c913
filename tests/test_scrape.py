"""Scrape ingest against real HTTP servers on 127.0.0.1 that serve corpus files and fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from collectors.exceptions import CollectorError
from collectors.pipeline import IngestOptions, ingest_scrapes
from collectors.scrape import scrape
from store import Held
from tests.exporters import Exporter
from tests.test_normalize import FIXTURES


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    e = Exporter()
    yield e
    e.close()


def test_scrape_streams_the_body_plain_and_gzip(exporter: Exporter, corpus: Path) -> None:
    body = (corpus / "serving" / "sglang" / "docs_references_production_metrics_example.prom").read_bytes()
    exporter.bodies["/metrics"] = body
    assert b"".join(scrape(exporter.url("/metrics"), chunk_bytes=1000)) == body
    exporter.gzip = True
    assert b"".join(scrape(exporter.url("/metrics"))) == body
    assert exporter.requests[-1]["Accept-Encoding"] == "gzip"
    assert exporter.requests[-1]["Accept"].startswith("text/plain;version=0.0.4")


def test_scrape_errors_name_the_url(exporter: Exporter) -> None:
    with pytest.raises(CollectorError, match=r"scrape of http://127\.0\.0\.1:\d+/nope failed: HTTP 404"):
        list(scrape(exporter.url("/nope")))
    port = exporter.server.server_address[1]
    exporter.close()
    with pytest.raises(CollectorError, match=rf"cannot scrape http://127\.0\.0\.1:{port}/metrics: connection refused"):
        list(scrape(f"http://127.0.0.1:{port}/metrics", timeout=2))
    with pytest.raises(CollectorError, match="bad scrape URL 'ftp://x/metrics'"):
        list(scrape("ftp://x/metrics"))


def test_scrape_ingests_corpus_exporters(exporter: Exporter, corpus: Path, con: duckdb.DuckDBPyConnection) -> None:
    exporter.bodies["/dcgm"] = (corpus / "dcgm" / "real_world_exposition_samples.prom").read_bytes()
    exporter.bodies["/vllm"] = (corpus / "serving" / "vllm" / "real_world_exposition_samples.prom").read_bytes()
    dcgm = ingest_scrapes(Held(con), exporter.url("/dcgm"), IngestOptions(pool="p"), clock=lambda: 1_795_000_000.0)
    vllm = ingest_scrapes(Held(con), exporter.url("/vllm"), IngestOptions(pool="p"), clock=lambda: 1_795_000_001.0)
    assert dcgm[0].as_dict() == {"read": 25, "stored": 15, "rejected": 4, "duplicates": 4, "ignored": 2}
    # the docs' TTFT histogram has no +Inf bucket: its 10 lines are rejects; so is the prefix cache's query count,
    # whose hit ratio needs the hit count of the same time, which this sample carries only under its deprecated name
    assert vllm[0].as_dict() == {"read": 30, "stored": 11, "rejected": 11, "duplicates": 0, "ignored": 8}
    # vLLM has no node label: the scrape target's host is the node; samples are stamped with the scrape time
    nodes = con.execute("SELECT DISTINCT node, ts FROM samples WHERE metric LIKE 'serving.%'").fetchall()
    assert nodes == [("127.0.0.1", 1_795_000_001_000)]


def test_five_scrapes_of_a_sticky_xid_are_five_runs_and_one_event(exporter: Exporter,
                                                                   con: duckdb.DuckDBPyConnection) -> None:
    exporter.bodies["/metrics"] = (FIXTURES / "dcgm_memory_xid.prom").read_bytes()
    now = [1_795_000_000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds

    reports = ingest_scrapes(Held(con), exporter.url("/metrics"), IngestOptions(pool="p"), count=5, every_s=15,
                             clock=lambda: now[0], sleep=sleep)
    assert len({r.run_id for r in reports}) == 5 and slept == [15.0] * 4
    assert [r.counts.stored for r in reports] == [7, 6, 6, 6, 6]  # the XID repeats fold
    events = con.sql("SELECT ts, value, attributes FROM samples WHERE metric = 'accelerator.errors'").pl()
    assert events.rows() == [(1_795_000_000_000, 1.0,
                              '{"code":"48","error_class":"memory_uncorrectable","severity":"fatal"}')]
    gauges = con.sql("SELECT count(DISTINCT ts) AS n FROM samples WHERE metric = 'accelerator.utilization'").pl()
    assert gauges["n"][0] == 5
    runs = con.sql("SELECT kind, read, stored, duplicates FROM ingest_runs ORDER BY run_id").pl()
    assert runs.rows() == [("scrape", 7, 7, 0)] + [("scrape", 7, 6, 1)] * 4
    assert pl.Series(slept).sum() == 60


def test_a_feed_behind_a_token_is_scraped_with_the_token_from_the_environment() -> None:
    from app.serve.feed import FeedServer
    from store.feed import FeedRead
    server = FeedServer("127.0.0.1", 0, lambda _limit: FeedRead([], [], 0), token="s3cret-token").start()
    url = f"{server.url}/metrics"
    try:
        body = b"".join(scrape(url, env={"HETPOOL_SCRAPE_TOKEN": "s3cret-token"}))
        assert b"hetpool_feed_series 0.0" in body
        for env, hint in (({}, "set HETPOOL_SCRAPE_TOKEN to the endpoint's bearer token"),
                          ({"HETPOOL_SCRAPE_TOKEN": "wrong"}, "check HETPOOL_SCRAPE_TOKEN")):
            with pytest.raises(CollectorError) as exc:
                b"".join(scrape(url, env=env))
            assert str(exc.value) == f"scrape of {url} failed: HTTP 401 Unauthorized; {hint}"
    finally:
        server.stop()
