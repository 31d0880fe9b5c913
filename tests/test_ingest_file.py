"""hetpool ingest file / ingest scrape from the command line: JSON counts, pools, one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from tests.cli import run
from tests.conftest import REPO
from tests.test_normalize import FIXTURES
from tests.test_scrape import Exporter


def test_file_json_counts_and_registry_pools(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    code, out, _ = run(capsys, "--db", str(fleet_db), "--json", "ingest", "file", str(FIXTURES / "gaudi.prom"),
                       "--at", "2026-11-29T08:00:00Z")
    assert code == 0
    data = json.loads(out)
    counts = {k: data[k] for k in ("read", "stored", "rejected", "duplicates")}
    assert counts == {"read": 10, "stored": 8, "rejected": 2, "duplicates": 0}
    assert data["read"] == data["stored"] + data["rejected"] + data["duplicates"] + data["ignored"]
    code, out, _ = run(capsys, "--db", str(fleet_db), "ingest", "file", str(FIXTURES / "gaudi.prom"),
                       "--at", "2026-11-29T08:00:00Z")
    assert code == 0 and "read 10, stored 0, rejected 2, duplicates 8" in out
    assert "rejected 1: value 140.0 is above the valid maximum 100.0 of habanalabs_utilization" in out
    con = duckdb.connect(str(fleet_db), read_only=True)
    assert con.execute("SELECT DISTINCT pool, min(ts) FROM samples GROUP BY pool").fetchall() == [
        ("gaudi3-a", 1795939200000)]
    con.close()


def test_folded_readings_are_said_in_words(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    # the README's example scrape: two GPUs whose XID reads 0, no error, which is no event and no row
    example = REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom"
    code, out, _ = run(capsys, "--db", str(fleet_db), "ingest", "file", str(example), "--at", "2026-11-29T08:00:00Z")
    lines = out.splitlines()
    assert code == 0 and "read 16, stored 14, rejected 0, duplicates 2, ignored 0" in lines[0]
    assert lines[1].startswith("  duplicates 2: 2 folded readings (an error code at 'no error'")
    assert "already stored" not in lines[1]
    code, out, _ = run(capsys, "--db", str(fleet_db), "--json", "ingest", "file", str(example), "--at",
                       "2026-11-29T08:00:00Z")
    data = json.loads(out)
    assert (data["duplicates"], data["folded"], data["stored"]) == (16, 2, 0)  # 14 rows stored by the first run
    code, out, _ = run(capsys, "--db", str(fleet_db), "ingest", "file", str(example), "--at", "2026-11-29T08:00:00Z")
    assert out.splitlines()[1].endswith("; 14 already stored by an earlier run")


@pytest.mark.parametrize("args, message", [
    (["--profile", "dcgn"], "unknown profile 'dcgn'; known: amd, ascend, cambricon, dcgm, gaudi"),
    (["--pool", "nope"], "unknown pool 'nope'; known: h100-a, mi300x-a, ascend-a, gaudi3-a, mlu370-a"),
    (["--at", "yesterday"], "bad time 'yesterday'"),
])
def test_bad_options_are_one_line_errors(capsys: pytest.CaptureFixture[str], fleet_db: Path, args: list[str],
                                         message: str) -> None:
    code, out, err = run(capsys, "--db", str(fleet_db), "ingest", "file", str(FIXTURES / "gaudi.prom"), *args)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_missing_file_registry_and_bad_profile_dir(capsys: pytest.CaptureFixture[str], db_path: Path,
                                                   tmp_path: Path) -> None:
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "file", str(tmp_path / "none.prom"), "--pool", "p")
    assert code == 2 and "file '" in err and "none.prom' not found" in err
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "file", str(FIXTURES / "gaudi.prom"))
    assert code == 2 and "no registry loaded" in err
    (tmp_path / "x.yaml").write_text("profile: x\ndetect: [x_]\nmetrics:\n  x_a: {metric: nope, unit: W}\n")
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "file", str(FIXTURES / "gaudi.prom"), "--pool", "p",
                       "--profiles-dir", str(tmp_path))
    assert code == 2 and "x.yaml:4: metrics.x_a.metric: unknown canonical metric 'nope'" in err


def test_scrape_command_counts_every_scrape(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    exporter = Exporter()
    try:
        exporter.bodies["/metrics"] = (FIXTURES / "dcgm_memory_xid.prom").read_bytes()
        code, out, err = run(capsys, "--db", str(db_path), "--json", "ingest", "scrape", exporter.url("/metrics"),
                             "--pool", "h100-a", "--every", "10ms", "--count", "3")
    finally:
        exporter.close()
    assert code == 0, err
    data = json.loads(out)
    assert {k: data[k] for k in ("read", "stored", "rejected", "duplicates")} == {
        "read": 21, "stored": 19, "rejected": 0, "duplicates": 2}  # the XID is one event over three scrapes
    assert len(data["runs"]) == 3 and err.count("scrape ") == 3


CANONICAL = (
    'accelerator_power_watts{pool="h100-a",node="h100-a-01",device="nvidia0",vendor="nvidia"} 612.4\n'
    'accelerator_memory_used_bytes{pool="h100-a",node="h100-a-01",device="nvidia0",vendor="nvidia"} 74694639616\n'
    'accelerator_power_watts{pool="b200-z",node="b200-z-01",device="0"} 700\n'
    'accelerator_power_watts{device="nvidia1",vendor="nvidia"} 598.1\n'  # no pool, no node: not the URL's host
    'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h100-a-01"} 71\n'
    'hetpool_feed_series 3\n'
)


def test_canonical_file_and_scrape(capsys: pytest.CaptureFixture[str], fleet_db: Path, tmp_path: Path) -> None:
    feed = tmp_path / "feed.prom"
    feed.write_text(CANONICAL)
    code, out, err = run(capsys, "--db", str(fleet_db), "--json", "ingest", "file", str(feed), "--canonical",
                         "--at", "2026-11-29T08:00:00Z")
    assert code == 0, err
    data = json.loads(out)
    assert {k: data[k] for k in ("read", "stored", "rejected", "duplicates", "ignored")} == {
        "read": 6, "stored": 2, "rejected": 3, "duplicates": 0, "ignored": 1}
    code, out, _ = run(capsys, "--db", str(fleet_db), "ingest", "file", str(feed), "--canonical")
    assert "rejected 1: no pool label: a canonical series names its pool" in out
    assert ("rejected 1: pool 'b200-z' is not in the registry; known: ascend-a, gaudi3-a, h100-a, h100-vl, mi300x-a"
            in out)
    assert "rejected 1: metric 'DCGM_FI_DEV_GPU_TEMP' is not a canonical feed name" in out
    exporter = Exporter()
    try:
        exporter.bodies["/metrics"] = CANONICAL.encode()
        code, out, err = run(capsys, "--db", str(fleet_db), "--json", "ingest", "scrape", exporter.url("/metrics"),
                             "--canonical", "--every", "10ms", "--count", "2")
    finally:
        exporter.close()
    assert code == 0, err
    data = json.loads(out)
    assert (data["read"], data["stored"], data["rejected"], data["ignored"]) == (12, 4, 6, 2)
    con = duckdb.connect(str(fleet_db), read_only=True)
    assert con.execute("SELECT DISTINCT pool, node, device, metric FROM samples ORDER BY ALL").fetchall() == [
        ("h100-a", "h100-a-01", "nvidia0", "accelerator.memory.used"),
        ("h100-a", "h100-a-01", "nvidia0", "accelerator.power")]
    assert con.execute("SELECT value FROM samples WHERE metric = 'accelerator.memory.used' LIMIT 1").fetchall() == [
        (74694639616.0,)]  # already bytes: no unit conversion
    con.close()


@pytest.mark.parametrize(("args", "message"), [
    (["--pool", "h100-a"], "--pool does not apply with --canonical"),
    (["--profile", "dcgm"], "--profile does not apply with --canonical"),
    (["--node", "h100-a-01"], "--node does not apply with --canonical: a canonical series names its node"),
])
def test_canonical_refuses_the_vendor_options(capsys: pytest.CaptureFixture[str], fleet_db: Path, tmp_path: Path,
                                              args: list[str], message: str) -> None:
    feed = tmp_path / "feed.prom"
    feed.write_text(CANONICAL)
    code, out, err = run(capsys, "--db", str(fleet_db), "ingest", "file", str(feed), "--canonical", *args)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["file", "scrape"])
def test_the_help_explains_canonical_input_with_an_example(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, _ = run(capsys, "ingest", command, "--help")
    assert code == 0 and "--canonical" in out and "no vendor profile" in " ".join(out.split())
    example = out[out.index("example:"):]
    assert f"hetpool ingest {command} " in example and "--canonical" in example


def newest(db: Path) -> dict[tuple[str, ...], float]:
    """Per series: the newest value, or for error events their sum (what the feed serves)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT pool, node, device, metric, attributes, "
                           "CASE WHEN metric = 'accelerator.errors' THEN sum(value) ELSE arg_max(value, ts) END "
                           "FROM samples GROUP BY pool, node, device, metric, attributes").fetchall()
    finally:
        con.close()
    return {tuple(r[:5]): float(r[5]) for r in rows}


def test_a_feed_scraped_canonically_stores_what_it_serves(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                          tmp_path: Path) -> None:
    """Raw exporter text into one store, its feed (`hetpool serve-feed`) scraped with --canonical into another:
    the same series and values, error totals as events, the same versions."""
    from app.serve.feed import FeedServer, store_reader
    from store import Store

    raw = REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom"
    assert run(capsys, "--db", str(fleet_db), "ingest", "file", str(raw), "--at", "2026-11-29T08:00:00Z")[0] == 0
    faults = tmp_path / "xid.prom"
    faults.write_text('DCGM_FI_DEV_XID_ERRORS{gpu="0",Hostname="h100-a-01"} 79 1795939215000\n'
                      'DCGM_FI_DEV_XID_ERRORS{gpu="0",Hostname="h100-a-01"} 48 1795939230000\n'
                      'DCGM_FI_DEV_XID_ERRORS{gpu="1",Hostname="h100-a-01"} 79 1795939230000\n')
    assert run(capsys, "--db", str(fleet_db), "ingest", "file", str(faults))[0] == 0
    other = tmp_path / "other.duckdb"
    shutil.copy(fleet_db, other)  # the same registry, and then its samples gone
    con = duckdb.connect(str(other))
    for table in ("samples", "versions", "error_state"):
        con.execute(f"DELETE FROM {table}")
    con.close()
    feed = FeedServer("127.0.0.1", 0, store_reader(Store(fleet_db), window_ms=10**12)).start()
    try:
        code, out, err = run(capsys, "--db", str(other), "--json", "ingest", "scrape", f"{feed.url}/metrics",
                             "--canonical")
    finally:
        feed.stop()
    assert code == 0, err
    data = json.loads(out)
    assert data["rejected"] == 0 and data["read"] == data["stored"] + data["ignored"], data
    want, got = newest(fleet_db), newest(other)
    assert {k[3] for k in want} >= {"accelerator.power", "accelerator.memory.total", "accelerator.errors"}
    assert got == pytest.approx(want), {"only scraped": set(got) - set(want), "only stored": set(want) - set(got)}
    assert want[("h100-a", "h100-a-01", "0", "accelerator.errors",
                 '{"code":"79","error_class":"device_lost","severity":"fatal"}')] == 1.0
    con = duckdb.connect(str(other), read_only=True)
    assert con.execute("SELECT pool, node, device, component, version FROM versions").fetchall() == [
        ("h100-a", "h100-a-01", "", "driver", "550.144.03")]
    con.close()


@pytest.mark.parametrize(("text", "flags"), [
    (b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h100-a-001",UUID="GPU-a\x00b"} 40\n'
     b'DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="h100-a-001"} 41\n', ()),
    (b'accelerator_utilization_ratio{pool="h100-a",node="h100-a-001",device="0",vendor="nvidia",model="m\x00"} 0.4\n'
     b'accelerator_utilization_ratio{pool="h100-a",node="h100-a-001",device="1",vendor="nvidia"} 0.5\n',
     ("--canonical",)),
], ids=["profile", "canonical"])
def test_a_nul_byte_in_a_label_value_is_a_reject(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                 tmp_path: Path, text: bytes, flags: tuple[str, ...]) -> None:
    path = tmp_path / "nul.prom"
    path.write_bytes(text)
    code, out, err = run(capsys, "--db", str(fleet_db), "--json", "ingest", "file", str(path), *flags)
    assert code == 0, err
    got = json.loads(out)
    assert (got["read"], got["stored"], got["rejected"]) == (2, 1, 1)
    con = duckdb.connect(str(fleet_db), read_only=True)
    try:
        reasons = con.execute("SELECT reason FROM rejects").fetchall()
        stored = con.execute("SELECT count(*) FROM samples WHERE attributes LIKE '%' || chr(0) || '%' "
                             "OR device LIKE '%' || chr(0) || '%'").fetchone()
    finally:
        con.close()
    assert len(reasons) == 1 and "holds a NUL byte; a label value is text without NUL" in reasons[0][0]
    assert stored == (0,)
