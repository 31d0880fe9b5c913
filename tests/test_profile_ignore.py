"""A profile's `ignore:` list: known metrics deliberately not mapped are counted as ignored, not rejected or stored."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from collectors.pipeline import IngestOptions, ingest_exposition
from normalizers import ProfileError, load_profile_text, load_profiles
from store import Held
from store.views.runs import sources
from tests.test_cli import run

PROFILE = """\
profile: enflame
detect: [enflame_]
node_labels: [host]
device_labels: [gcu]
ignore:
  - enflame_gcu_voltage
  - enflame_debug_*
  - enflame_build_info
metrics:
  enflame_gcu_usage: {metric: accelerator.utilization, unit: percent, min: 0, max: 100}
"""

SCRAPE = b"""\
# HELP enflame_gcu_usage utilization
enflame_gcu_usage{host="n1",gcu="0"} 42
enflame_gcu_usage{host="n1",gcu="1"} 40
enflame_gcu_voltage{host="n1",gcu="0"} 0.8
enflame_gcu_voltage{host="n1",gcu="1"} NaN
enflame_debug_queue_depth{gcu="0"} 3
enflame_debug_dma_bytes_total{host="n1"} 12
enflame_build_info{host="n1",version="1.2"} 1
enflame_gcu_unknown{host="n1",gcu="0"} 7
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ProfileError) as info:
        load_profile_text(text, "enflame.yaml")
    return [str(p) for p in info.value.problems]


def test_entries_are_names_families_or_prefixes() -> None:
    p = load_profile_text(PROFILE)
    assert p.ignore == ("enflame_gcu_voltage", "enflame_debug_*", "enflame_build_info")
    assert p.ignores("enflame_gcu_voltage") == "enflame_gcu_voltage"
    assert p.ignores("enflame_gcu_voltage_total") == "enflame_gcu_voltage"  # a family covers its samples
    assert p.ignores("enflame_gcu_voltage_bucket") == "enflame_gcu_voltage"
    assert p.ignores("enflame_gcu_voltages") is None
    assert p.ignores("enflame_debug_anything") == "enflame_debug_*"
    assert p.ignores("enflame_debug_anything", prefixes=False) is None
    assert p.ignores("enflame_gcu_usage") is None


@pytest.mark.parametrize("entries, line, message", [
    ('[""]', 5, "ignore[0]: expected a non-empty metric name, or a prefix ending in '*'"),
    ('["*"]', 5, "ignore[0]: bad entry '*'"),
    ('["enflame_*_x"]', 5, "ignore[0]: bad entry 'enflame_*_x'"),
    ("[[a]]", 5, "ignore[0]: expected a string"),
    ("enflame_x", 5, "ignore: expected a list"),
    ("[enflame_x, enflame_gcu_usage]", 5,
     "ignore[1]: 'enflame_gcu_usage' is both mapped under metrics and ignored; drop one of the two"),
    ("[enflame_gcu_usage_total]", 5, "ignore[0]: 'enflame_gcu_usage_total' is a sample of 'enflame_gcu_usage', "
                                     "which is mapped under metrics"),
    ("[enflame_gcu_*]", 5, "ignore[0]: 'enflame_gcu_usage' is both mapped under metrics and ignored (entry "
                           "'enflame_gcu_*' covers it)"),
])
def test_bad_entries_name_file_line_and_field(entries: str, line: int, message: str) -> None:
    text = PROFILE.replace("ignore:\n  - enflame_gcu_voltage\n  - enflame_debug_*\n  - enflame_build_info\n",
                           f"ignore: {entries}\n")
    found = problems(text)
    assert any(p.startswith(f"enflame.yaml:{line}: {message}") for p in found), found


def test_an_ignored_error_signal_or_derived_input_is_a_collision() -> None:
    text = PROFILE + ("errors:\n  enflame_xid: {kind: sticky_code, default: unknown/recoverable}\n"
                      "derived:\n  - {metric: accelerator.memory.total, sum: [enflame_a, enflame_b], unit: MiB}\n")
    found = problems(text.replace("  - enflame_build_info\n", "  - enflame_xid\n  - enflame_b\n"))
    assert any("'enflame_xid' is both mapped under errors and ignored" in p for p in found), found
    assert any("'enflame_b' is both mapped under derived and ignored" in p for p in found), found


def test_ignored_lines_are_counted_not_rejected_nor_stored(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    (tmp_path / "enflame.yaml").write_text(PROFILE)
    report = ingest_exposition(Held(con), [SCRAPE], kind="file", source="scrape.prom",
                               options=IngestOptions(pool="p", profiles_dirs=(tmp_path,), at_ms=1_794_990_000_000),
                               clock=lambda: 1_795_000_000.0)
    c = report.counts
    # 8 samples: 2 stored; voltage x2 (one NaN), the debug prefix x2 (one without a node), build info: 5 ignored
    assert c.as_dict() == {"read": 8, "stored": 2, "rejected": 1, "duplicates": 0, "ignored": 5}
    assert c.read == c.stored + c.rejected + c.duplicates + c.ignored
    assert list(report.reasons) == ["metric 'enflame_gcu_unknown' is not mapped by profile 'enflame'"]
    assert con.execute("SELECT count(*) FROM samples WHERE metric <> 'accelerator.utilization'").fetchall() == [(0,)]
    rows = con.execute("SELECT read, stored, rejected, duplicates, ignored FROM ingest_runs WHERE run_id = ?",
                       [report.run_id]).fetchall()
    assert rows == [(8, 2, 1, 0, 5)]
    assert sources(con).select("last_read", "last_stored", "last_rejected", "last_ignored").row(0) == (8, 2, 1, 5)


def test_the_cli_prints_the_ignored_count(capsys: pytest.CaptureFixture[str], tmp_path: Path, db_path: Path) -> None:
    (tmp_path / "enflame.yaml").write_text(PROFILE)
    (tmp_path / "scrape.prom").write_bytes(SCRAPE)
    argv = ["--db", str(db_path), "ingest", "file", str(tmp_path / "scrape.prom"), "--pool", "p", "--profiles-dir",
            str(tmp_path)]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "read 8, stored 2, rejected 1, duplicates 0, ignored 5 (run 1)" in out
    code, out, _ = run(capsys, "--json", *argv)
    assert code == 0 and json.loads(out)["ignored"] == 5


def test_an_ignored_name_routes_to_its_profile_but_a_prefix_claims_nothing(tmp_path: Path) -> None:
    (tmp_path / "enflame.yaml").write_text(PROFILE)
    profiles = load_profiles([tmp_path])
    assert profiles.detect("enflame_build_info") is profiles.get("enflame")
    assert profiles.detect("machine_card_nums") is profiles.get("ascend")  # named by the shipped ascend profile
    (tmp_path / "enflame.yaml").write_text(PROFILE.replace("detect: [enflame_]", "detect: [enf_]"))
    profiles = load_profiles([tmp_path])
    assert profiles.detect("enflame_debug_queue_depth") is None


def test_runs_recorded_before_the_column_read_as_nothing_ignored(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("INSERT INTO ingest_runs (kind, source, started_at) VALUES ('file', 'old', now())")
    assert con.execute("SELECT ignored FROM ingest_runs WHERE source = 'old'").fetchall() == [(0,)]
    assert (7,) in con.execute("SELECT version FROM schema_migrations").fetchall()  # the column came with 0007
