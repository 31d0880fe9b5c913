"""The lake: canonical rows as Hive-partitioned Parquet, DIR/date=YYYY-MM-DD/pool=ID/part-0.parquet.

A run compares each (day, pool) partition's fingerprint in the store (row count and an order-independent
checksum of its rows) with the one `_manifest.json` recorded when the partition was last written, and writes
only the partitions that are new or changed, today's growing one included. Each partition is one short read
of the store (its fingerprint and its rows in the same read, so they agree), written to a hidden temporary
file in its folder and renamed into place: a killed export leaves no partial file where a reader looks.

Partitions whose rows the store no longer holds (pruned raw days, or outside this run's window or pools)
are kept as they are: the lake outlives the store's retention. A window (--start/--end) picks the whole days
it touches; a lake holds one resolution and one set of metrics, named in its manifest. `ts` is a Parquet
TIMESTAMP (milliseconds, UTC) and `attributes` a map of strings (store.lakeparquet, lake schema version 2); a
run first rewrites the files an earlier version wrote, so a lake never mixes types. `pool` is in each file too,
so a file read alone still names its pool.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb

from canonical.metrics import CATALOG_VERSION, METRICS
from canonical.timeunits import DAY_MS
from store.db import Access
from store.exceptions import StoreError
from store.exports import RESOLUTIONS, SOURCES, ExportFilter, check_names
from store.lakefiles import (
    SCHEMA_FILE,
    SCHEMA_VERSION,
    Fingerprint,
    Manifest,
    Replace,
    read_manifest,
    read_schema_version,
    remove_leftovers,
    temp_name,
    write_json,
    write_manifest,
    writer_lock,
)
from store.lakeparquet import columns, upgrade, write_rows
from store.rollups import raw_horizon

PART_FILE = "part-0.parquet"
PARTITION_COLUMNS = (("date", "DATE"), ("pool", "VARCHAR"))


@dataclass(frozen=True)
class LakeResult:
    """What a run did: rows and partitions written, partitions found unchanged, partitions kept from before."""

    rows: int
    path: str
    resolution: str
    written: int
    unchanged: int
    kept: int
    upgraded: int = 0  # files an earlier lake schema version wrote, rewritten in this one


def hetpool_version() -> str:
    """The installed hetpool's version ('unknown' when run from a checkout that was never installed)."""
    try:
        return metadata.version("hetpool")
    except metadata.PackageNotFoundError:
        return "unknown"


def schema_body(resolution: str, version: str) -> dict[str, Any]:
    """_schema.json: the lake schema version, the layout, the columns with their DuckDB and Arrow types, the metric
    catalog's version and metrics, hetpool's version."""
    return {
        "schema_version": SCHEMA_VERSION,
        "layout": f"date=YYYY-MM-DD/pool=ID/{PART_FILE}",
        "resolution": resolution,
        "columns": [{"name": n, "type": t, "arrow": str(a)} for n, t, a in columns(resolution)],
        "partition_columns": [{"name": n, "type": t} for n, t in PARTITION_COLUMNS],
        "ts": "Parquet TIMESTAMP, milliseconds, UTC" + ("" if resolution == "raw" else ", the bucket's start"),
        "attributes": "Parquet MAP of string to string, keys sorted",
        "metric_catalog": {"version": CATALOG_VERSION,
                           "metrics": {m.name: {"unit": m.unit, "kind": m.kind} for m in METRICS.values()}},
        "hetpool_version": version,
    }


def partition_key(day: int, pool: str) -> str:
    """The partition's folder relative to the lake, as the manifest names it: date=2026-11-18/pool=h100-a.

    `day` counts days since 1970-01-01 (UTC); a pool name is percent-encoded where it is not a plain name."""
    date = (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()
    return f"date={date}/pool={quote(pool, safe='')}"


def _source(resolution: str, flt: ExportFilter) -> tuple[str, str, str, str, str, list[object]]:
    """The table and columns a resolution reads, and the filter's condition on it with its parameters."""
    table, time_col, value, stats = SOURCES[resolution]
    where, params = flt.where(time_col)
    return table, time_col, value, stats, where, params


def fingerprints(con: duckdb.DuckDBPyConnection, flt: ExportFilter, resolution: str,
                 only: tuple[int, str] | None = None) -> dict[tuple[int, str], Fingerprint]:
    """Every (day, pool) partition's fingerprint in the store, or only the one named."""
    table, time_col, value, stats, where, params = _source(resolution, flt)
    if only is not None:
        where += f" AND {time_col} >= ? AND {time_col} < ? AND pool = ?"
        params += [only[0] * DAY_MS, (only[0] + 1) * DAY_MS, only[1]]
    hashed = f"{time_col}, node, device, metric, {value}, attributes{stats}"
    rows = con.execute(f"SELECT {time_col} // {DAY_MS} AS day, pool, count(*), sum(hash({hashed}))::VARCHAR "
                       f"FROM {table} WHERE {where} GROUP BY ALL", params).fetchall()
    return {(int(d), str(p)): Fingerprint(int(n), str(c)) for d, p, n, c in rows}


def _copy(con: duckdb.DuckDBPyConnection, flt: ExportFilter, resolution: str, day: int, pool: str,
          target: Path, final: Path) -> None:
    table, time_col, value, stats, where, params = _source(resolution, flt)
    cols = f"{time_col} AS ts, pool, node, device, metric, {value} AS value, attributes{stats}"
    query = (f"SELECT {cols} FROM {table} WHERE {where} AND {time_col} >= ? AND {time_col} < ? AND pool = ? "
             "ORDER BY ts, node, device, metric, attributes")
    write_rows(con, query, [*params, day * DAY_MS, (day + 1) * DAY_MS, pool], target, resolution, final)


def write_lake(store: Access, out: str | Path, flt: ExportFilter | None = None, *,
               version: str | None = None, replace: Replace = os.replace,
               stop: Callable[[], bool] = lambda: False) -> LakeResult:
    """Bring the lake in `out` up to date with the store; see the module's docstring for what is written.

    `stop` is asked between partitions: once it says true, the partitions written so far are recorded and
    the run ends early (the next one continues)."""
    flt = flt or ExportFilter()
    folder = Path(out)
    if flt.resolution not in RESOLUTIONS:
        raise StoreError(f"unknown resolution '{flt.resolution}'; known: {', '.join(RESOLUTIONS)}")
    resolution = "raw" if flt.resolution == "auto" else flt.resolution
    if not folder.parent.exists():
        raise StoreError(f"cannot write {str(folder)!r}: folder {str(folder.parent)!r} does not exist")
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"{str(folder)!r} is a file; a partitioned export goes to a folder")
    # a partition is a whole day: the window picks the days it touches, never part of one
    metrics = tuple(sorted(set(flt.metrics)))
    flt = ExportFilter(None if flt.start_ms is None else flt.start_ms - flt.start_ms % DAY_MS,
                       None if flt.end_ms is None else -(-flt.end_ms // DAY_MS) * DAY_MS,
                       flt.pools, metrics, resolution)
    with store.read() as con:
        check_names(con, flt)
        found = fingerprints(con, flt, resolution)
        horizon = raw_horizon(con) if resolution == "raw" else None
    folder.mkdir(exist_ok=True)
    with writer_lock(folder):
        remove_leftovers(folder)
        manifest = read_manifest(folder) or Manifest(resolution, metrics, {})
        if manifest.resolution != resolution:
            raise StoreError(f"the lake {str(folder)!r} holds {manifest.resolution} rows, this export asks for "
                             f"{resolution}; pass --resolution {manifest.resolution} or pick another folder")
        if manifest.metrics != metrics:
            raise StoreError(f"the lake {str(folder)!r} holds {_names(manifest.metrics)}, this export asks for "
                             f"{_names(metrics)}; pick another folder for another set of metrics")
        stored = read_schema_version(folder)
        if stored is not None and stored > SCHEMA_VERSION:
            raise StoreError(f"the lake {str(folder)!r} has lake schema version {stored} (its {SCHEMA_FILE}); this "
                             f"hetpool writes version {SCHEMA_VERSION}: update hetpool or pick another folder")
        write_manifest(folder, manifest, replace)  # a new lake is one from its first file on, even if killed
        # older files first, and _schema.json names the new version only once none is left: a killed run resumes
        upgraded = 0 if stored == SCHEMA_VERSION else upgrade(sorted(folder.glob(f"date=*/pool=*/{PART_FILE}")),
                                                               resolution, replace)
        write_json(folder / SCHEMA_FILE, schema_body(resolution, version or hetpool_version()), replace)
        parts = dict(manifest.partitions)
        todo = []
        for (day, pool), fp in sorted(found.items()):
            key = partition_key(day, pool)
            present = key in parts and (folder / key / PART_FILE).exists()
            if present and horizon is not None and day * DAY_MS < horizon:
                continue  # the store pruned part of this day: the lake's copy is the fuller one
            if not present or parts[key] != fp:
                todo.append((day, pool, key))
        rows = done = 0
        try:
            for day, pool, key in todo:
                if stop():
                    break
                rows += _write_partition(store, flt, resolution, day, pool, folder / key, parts, key, replace)
                done += 1
        finally:
            write_manifest(folder, Manifest(resolution, metrics, parts), replace)
    kept = len(set(parts) - {partition_key(d, p) for d, p in found})
    return LakeResult(rows, str(folder), resolution, done, len(found) - len(todo), kept, upgraded)


def _names(metrics: tuple[str, ...]) -> str:
    return "every metric" if not metrics else "only " + ", ".join(metrics)


def _write_partition(store: Access, flt: ExportFilter, resolution: str, day: int, pool: str, where: Path,
                     parts: dict[str, Fingerprint], key: str, replace: Replace) -> int:
    """One partition in one read: its fingerprint and its file agree; the file appears whole or not at all."""
    where.mkdir(parents=True, exist_ok=True)
    final = where / PART_FILE
    tmp = temp_name(final)
    with store.read() as con:
        fp = fingerprints(con, flt, resolution, only=(day, pool)).get((day, pool), Fingerprint(0, "0"))
        _copy(con, flt, resolution, day, pool, tmp, final)  # a failure removes tmp
    try:
        replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    parts[key] = fp
    return fp.rows
