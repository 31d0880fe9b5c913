"""Canonical series read back: feed names and labels into rows, rejects with reasons, error events across runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from canonical.feednames import feed_labels, sample_name
from collectors.pipeline import IngestOptions, IngestReport, ingest_exposition
from normalizers import Context, NormalizerError, ProfileSet
from normalizers.canonical_in import resolve_canonical
from pool_registry import load_registry
from store import Store
from tests.conftest import FLEET

T0 = 1_793_491_200_000  # 2026-11-01T00:00:00Z, in ms
POOLS = load_registry(FLEET).pools
KNOWN = "ascend-a, gaudi3-a, h100-a, h100-vl, mi300x-a, mlu370-a"
CTX = Context(ProfileSet({}), None, POOLS, vendors={"h100-a": "nvidia", "ascend-a": "huawei"})
HERE = {"pool": "h100-a", "node": "h100-a-01", "device": "nvidia0", "vendor": "nvidia"}
ERR = {"error_class": "device_lost", "severity": "fatal", "code": "79"}


def line(name: str, labels: dict[str, str], value: float, ts: int) -> str:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{text}}} {value} {ts}\n"


def ingest(store: Store, text: str, now_ms: int = T0 + 3_600_000) -> IngestReport:
    report = ingest_exposition(store, [text.encode()], kind="file", source="feed.prom",
                               options=IngestOptions(canonical=True), clock=lambda: now_ms / 1000)
    assert report.counts.balanced, report.counts
    return report


def rows(db: Path, metric: str | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        where, args = ("WHERE metric = ?", [metric]) if metric else ("", [])
        return con.execute(f"SELECT ts, pool, node, device, metric, value, attributes FROM samples {where} "
                           f"ORDER BY ALL", args).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize(("name", "labels", "reason"), [
    ("accelerator_power_watts", {**HERE, "pool": "b200-z"},
     f"pool 'b200-z' is not in the registry; known: {KNOWN}"),
    ("accelerator_power_watts", {"node": "h100-a-01"}, "no pool label: a canonical series names its pool"),
    ("accelerator_power_watts", {"pool": "h100-a"}, "no node label: a canonical series names its node"),
    ("DCGM_FI_DEV_POWER_USAGE", HERE, "metric 'DCGM_FI_DEV_POWER_USAGE' is not a canonical feed name"),
    ("accelerator_power", HERE, "metric 'accelerator_power' is not a canonical feed name"),  # no unit suffix
    ("serving_requests_created", HERE, "'serving_requests_created' is the creation time of a counter"),
    ("serving_time_to_first_token_seconds_bucket", {**HERE, "le": "soon"},
     "histogram bucket 'serving_time_to_first_token_seconds_bucket' has a missing or bad le 'soon'"),
    ("serving_time_to_first_token_seconds_bucket", HERE, "has a missing or bad le None"),
    ("accelerator_errors_total", {**HERE, **ERR, "error_class": "gremlins"},
     "error_class 'gremlins' is not a canonical error class; expected one of: memory_uncorrectable,"),
    ("accelerator_error_state", {**HERE, **ERR, "severity": "dire"},
     "severity 'dire' is not a canonical severity; expected one of: fatal, recoverable, informational"),
    ("accelerator_errors_total", HERE, "error_class '' is not a canonical error class"),
    ("hetpool_software_version_info", {**HERE, "component": "driver"},
     "needs both a component and a version label, got component='driver' version=''"),
    ("accelerator_power_watts", {**HERE, "vendor": "amd"},
     "vendor 'amd' is not the vendor of pool 'h100-a', whose chip is 'nvidia' in this registry"),
    ("accelerator_clock_hertz", {**HERE, "scope": "engine"},
     "scope 'engine' is not a scope the feed writes; expected 'component' or no scope label"),
])
def test_what_cannot_be_placed_or_named_is_rejected_with_the_reason(name: str, labels: dict[str, str],
                                                                    reason: str) -> None:
    got = resolve_canonical(CTX, name, labels)
    assert got.reason is not None and reason in got.reason, got.reason


def test_labels_become_place_and_attributes_as_the_feed_wrote_them() -> None:
    labels = {**feed_labels("h100-a", "h100-a-01", "nvidia0", "nvidia", {"engine": "sm", "pool": "x"}),
              "job": "hetpool", "instance": "feed:9464"}
    assert labels["attr_pool"] == "x"  # the feed's escape of an attribute named like a base label
    got = resolve_canonical(CTX, sample_name("accelerator.utilization"), labels)
    assert (got.reason, got.pool, got.node, got.device, got.metric, got.attributes, got.scale) == (
        None, "h100-a", "h100-a-01", "nvidia0", "accelerator.utilization", '{"engine":"sm","pool":"x"}', 1.0)
    bucket = resolve_canonical(CTX, "serving_time_to_first_token_seconds_bucket",
                               {"pool": "h100-a", "node": "n1", "le": "1.0", "model_name": "m"})
    assert (bucket.metric, bucket.attributes) == ("serving.time_to_first_token",
                                                  '{"le":"1","model_name":"m","stat":"bucket"}')
    assert resolve_canonical(CTX, "hetpool_feed_series", {}).kind == "ignored"


def test_a_feed_file_stores_rows_events_and_versions(fleet_db: Path) -> None:
    store = Store(fleet_db)
    text = "".join([
        line("accelerator_power_watts", {**HERE, "job": "feed", "instance": "f:9464"}, 350.5, T0),
        line("accelerator_power_watts", {**HERE, "pool": "nope"}, 1, T0),
        line("serving_time_to_first_token_seconds_bucket", {"pool": "h100-a", "node": "h100-a-01", "le": "0.1"},
             3, T0),
        line("serving_time_to_first_token_seconds_sum", {"pool": "h100-a", "node": "h100-a-01"}, 0.25, T0),
        line("accelerator_errors_total", {**HERE, **ERR}, 2, T0),
        line("accelerator_error_state", {**HERE, "device": "nvidia1", **ERR}, 1, T0),
        line("accelerator_error_state", {**HERE, "device": "nvidia2", **ERR}, 0.5, T0),
        line("hetpool_software_version_info", {"pool": "h100-a", "node": "h100-a-01", "component": "driver",
                                               "version": "550.144.03"}, 1, T0),
        line("hetpool_feed_series", {}, 7, T0),
        line("accelerator_power_watts", HERE, 351, T0 + 15_000),
        line("accelerator_errors_total", {**HERE, **ERR}, 5, T0 + 15_000),
        line("accelerator_error_state", {**HERE, "device": "nvidia1", **ERR}, 1, T0 + 15_000),
    ])
    report = ingest(store, text)
    # 12 read: 7 rows (2 power, 2 histogram parts, 3 events), 2 rejected, 1 repeat of a held state, 2 ignored
    assert report.counts.as_dict() == {"read": 12, "stored": 7, "rejected": 2, "duplicates": 1, "ignored": 2}
    assert dict(report.reasons) == {f"pool 'nope' is not in the registry; known: {KNOWN}": 1,
                                    "value 0.5 is not one of 0, 1 for accelerator_error_state": 1}
    events = json.dumps(ERR, sort_keys=True, separators=(",", ":"))
    assert rows(fleet_db) == [
        (T0, "h100-a", "h100-a-01", "", "serving.time_to_first_token", 0.25, '{"stat":"sum"}'),
        (T0, "h100-a", "h100-a-01", "", "serving.time_to_first_token", 3.0, '{"le":"0.1","stat":"bucket"}'),
        (T0, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 2.0, events),  # a new counter counts its value
        (T0, "h100-a", "h100-a-01", "nvidia0", "accelerator.power", 350.5, "{}"),
        (T0, "h100-a", "h100-a-01", "nvidia1", "accelerator.errors", 1.0, events),  # a new state at 1 is one event
        (T0 + 15_000, "h100-a", "h100-a-01", "nvidia0", "accelerator.errors", 3.0, events),  # 5 - 2
        (T0 + 15_000, "h100-a", "h100-a-01", "nvidia0", "accelerator.power", 351.0, "{}"),
    ]
    con = duckdb.connect(str(fleet_db), read_only=True)
    assert con.execute("SELECT pool, node, device, component, version FROM versions").fetchall() == [
        ("h100-a", "h100-a-01", "", "driver", "550.144.03")]
    con.close()
    assert ingest(store, text).counts.stored == 0  # the same file again: nothing new


def test_a_feed_whose_registry_puts_a_pool_on_other_hardware_is_rejected_and_kept(fleet_db: Path) -> None:
    """The vendor label is not stored (this registry says it), so a feed written against a registry that puts
    the pool on another vendor's chip would be misread: such series are rejected with the reason, and kept."""
    store = Store(fleet_db)
    text = "".join([line("accelerator_power_watts", HERE, 350.0, T0),
                    line("accelerator_power_watts", {**HERE, "device": "nvidia1", "vendor": ""}, 340.0, T0),
                    line("accelerator_power_watts", {**HERE, "device": "davinci0", "vendor": "huawei"}, 90.0, T0)])
    report = ingest(store, text)
    assert report.counts.as_dict() == {"read": 3, "stored": 2, "rejected": 1, "duplicates": 0, "ignored": 0}
    assert dict(report.reasons) == {"vendor 'huawei' is not the vendor of pool 'h100-a', whose chip is 'nvidia' "
                                    "in this registry: the registry the feed was written with places the pool on "
                                    "other hardware": 1}
    con = duckdb.connect(str(fleet_db), read_only=True)
    try:
        kept = con.execute("SELECT reason FROM rejects").fetchall()
    finally:
        con.close()
    assert [r[0] for r in kept] == list(report.reasons)


def test_error_counters_and_states_carry_their_state_across_runs(fleet_db: Path) -> None:
    store = Store(fleet_db)
    counter = {**HERE, **ERR}
    state = {**HERE, "device": "nvidia1", **ERR, "error_class": "thermal", "severity": "recoverable"}
    ingest(store, line("accelerator_errors_total", counter, 4, T0) + line("accelerator_error_state", state, 1, T0))
    # next run: the counter rose by 2, then dropped (a restart: its new value is the increase); the state held
    # at 1 (no event), cleared, and came back (one event)
    later = [(15_000, 6, 1), (30_000, 1, 1), (45_000, 1, 0), (60_000, 3, 1)]
    ingest(store, "".join(line("accelerator_errors_total", counter, c, T0 + dt) +
                          line("accelerator_error_state", state, s, T0 + dt) for dt, c, s in later))
    got = [(ts - T0, device, value) for ts, _, _, device, _, value, _ in rows(fleet_db, "accelerator.errors")]
    assert got == [(0, "nvidia0", 4.0), (0, "nvidia1", 1.0), (15_000, "nvidia0", 2.0), (30_000, "nvidia0", 1.0),
                   (60_000, "nvidia0", 2.0), (60_000, "nvidia1", 1.0)]


def test_canonical_input_takes_no_pool_or_profile_and_needs_a_registry(fleet_db: Path, db_path: Path,
                                                                       tmp_path: Path) -> None:
    with pytest.raises(NormalizerError, match="--pool and --profile do not apply with --canonical"):
        ingest_exposition(Store(fleet_db), [b""], kind="file", source="x",
                          options=IngestOptions(canonical=True, pool="h100-a", profile="dcgm"))
    empty = tmp_path / "empty.duckdb"
    with pytest.raises(NormalizerError, match="no registry loaded, so the pool labels of canonical series"):
        ingest_exposition(Store(empty).ensure("test"), [b""], kind="file", source="x",
                          options=IngestOptions(canonical=True))


def test_a_series_of_one_part_of_a_device_stays_one_part(fleet_db: Path) -> None:
    """scope="component" (a profile's `scope: component`, as the feed labels it) is stored as not device-wide,
    so the device views of the pulling hetpool read only the series that describe the whole device."""
    part = feed_labels(*HERE.values(), {"clock": "memory"}, device_wide=False)
    assert part["scope"] == "component"
    text = line("accelerator_clock_hertz", HERE, 1.98e9, T0) + line("accelerator_clock_hertz", part, 2.6e9, T0)
    assert ingest(Store(fleet_db), text).counts.stored == 2
    con = duckdb.connect(str(fleet_db), read_only=True)
    try:
        got = con.execute("SELECT attributes, value, device_wide FROM samples ORDER BY ALL").fetchall()
    finally:
        con.close()
    assert got == [('{"clock":"memory"}', 2.6e9, False), ("{}", 1.98e9, True)]
