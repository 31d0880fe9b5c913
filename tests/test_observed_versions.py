"""Observed software versions per node and component, newest first."""

from __future__ import annotations

import duckdb
import polars as pl

from store import Held, IngestRun, commit_run
from store.observed_versions import current_versions, observed_versions


def test_versions_widen_and_the_newest_is_current(con: duckdb.DuckDBPyConnection) -> None:
    seen = pl.DataFrame({
        "pool": ["a", "a", "a", "a", "b"], "node": ["n1", "n1", "n1", "n2", "m1"], "device": ["", "", "", "", "0"],
        "component": ["driver", "driver", "driver", "driver", "vbios"],
        "version": ["550.1", "550.1", "560.2", "550.1", "113-x"], "ts": [100, 300, 500, 200, 50],
    })
    run = IngestRun("file", "t")
    run.add_versions(seen)
    commit_run(Held(con), run)
    run = IngestRun("file", "t2")  # a later run widens first/last seen
    run.add_versions(seen.head(1).with_columns(ts=pl.lit(40)))
    commit_run(Held(con), run)
    rows = observed_versions(con, pool="a")
    assert rows.select("node", "version", "first_seen", "last_seen").rows() == [
        ("n1", "560.2", 500, 500), ("n1", "550.1", 40, 300), ("n2", "550.1", 200, 200)]
    assert current_versions(con).select("pool", "node", "device", "component", "version").rows() == [
        ("a", "n1", "", "driver", "560.2"), ("a", "n2", "", "driver", "550.1"), ("b", "m1", "0", "vbios", "113-x")]
    assert observed_versions(con, component="vbios").height == 1
