"""Credentials a server echoes back never reach the store, the console or the terminal."""

from __future__ import annotations

import json

import duckdb
import pytest

from canonical.redact import redact
from store import Held, IngestRun, commit_run

SECRET = "s3cr3t-T0ken.value"


@pytest.mark.parametrize(("text", "expected"), [
    (f'HTTP 500: {{"Authorization": "Bearer {SECRET}"}}', 'HTTP 500: {"Authorization": "Bearer <redacted>"}'),
    (f"echo: Authorization: Bearer {SECRET}", "echo: Authorization: <redacted>"),
    (f"Authorization=Basic {SECRET}", "Authorization=<redacted>"),
    (f"GET /api?token={SECRET}&step=15", "GET /api?token=<redacted>&step=15"),
    (f'{{"password": "{SECRET}", "user": "bob"}}', '{"password": "<redacted>", "user": "bob"}'),
    (f"api_key={SECRET}", "api_key=<redacted>"),
    (f"cannot reach http://bob:{SECRET}@prom:9090/api/v1", "cannot reach http://bob:<redacted>@prom:9090/api/v1"),
    ("HTTP 503: upstream busy, retry in 5s", "HTTP 503: upstream busy, retry in 5s"),
    ("query 'up{job=\"node\"}' failed", "query 'up{job=\"node\"}' failed"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_run_stores_its_warnings_redacted(con: duckdb.DuckDBPyConnection) -> None:
    run = IngestRun("prometheus", "http://prom:9090")
    run.warn(f"chunk 3 failed: HTTP 500: request had Authorization: Bearer {SECRET}")
    run.fail(f"server said token={SECRET}")
    commit_run(Held(con), run)
    stored = con.execute("SELECT warnings FROM ingest_runs").fetchall()[0][0]
    assert SECRET not in stored and json.loads(stored) == [
        "chunk 3 failed: HTTP 500: request had Authorization: <redacted>", "server said token=<redacted>"]
