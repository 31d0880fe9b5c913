"""Inputs that once ended in a traceback or a hang: each is one clear line and exit 2, or a reject naming
the record and a count that still adds up."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import REPO
from tests.test_cli import run

GOOD_LINE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h100-a-001"} 40\n'
BURST = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def corrupt_gz() -> bytes:
    good = gzip.compress(GOOD_LINE * 50)
    return good[:20] + b"\x00garbage that is no deflate stream" + good[-8:]


FATAL = [  # (file name, content, extra args, what stderr must say)
    ("broken.gz", corrupt_gz(), ("ingest", "file"), "cannot read"),
    # beyond what libyaml nests (and then what the pure-Python parser can recurse)
    ("deep.yaml", ("chips: " + "[" * 2000 + "]" * 2000 + "\n").encode(), ("registry", "validate"),
     "deep.yaml: YAML nested too deeply to read"),
    ("dup.csv", b"arrival_ms,in_tokens,in_tokens\n1,2,3\n", ("ingest", "traffic"),
     "column 'in_tokens' named more than once"),
    ("ok.csv", b"arrival_ms,in_tokens,out_tokens\n1764000000000,3,3\n", ("ingest", "traffic", "--time-scale", "1e-300"),
     "expected a factor from 0.001 to 1000, got '1e-300'"),
]


@pytest.mark.parametrize(("name", "content", "command", "said"), FATAL, ids=[f[0] for f in FATAL])
def test_an_unusable_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                  tmp_path: Path, name: str, content: bytes,
                                                  command: tuple[str, ...], said: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = run(capsys, "--db", str(fleet_db), *command[:2], str(path), *command[2:])
    assert code == 2 and said in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


REJECTED = [  # (file name, content, the bad row's line and reason); each file has one good row too
    ("surrogate.jsonl", b'{"arrival_ms": 1764000000000, "in_tokens": 2, "out_tokens": 3, "model": "a\\ud800"}\n'
                        b'{"arrival_ms": 1764000000001, "in_tokens": 2, "out_tokens": 3, "model": "\\ud83d\\ude00"}\n',
     "line 1: a string with a lone surrogate escape (such as \\ud800): not Unicode text"),
    ("seq.csv", b"arrival_ms,in_tokens,out_tokens,seq\n1764000000000,3,3,9\n1764000000001,4,3,x\n", None),
    ("tokens.csv", b"arrival_ms,in_tokens,out_tokens\n1764000000000,3000000000,3\n1764000000001,20,3\n",
     "line 2: in_tokens 3000000000 is above the largest count stored, 2147483647"),
    ("inf.jsonl", b'{"timestamp": 1e400, "input_length": 5, "output_length": 3, "hash_ids": []}\n'
                  b'{"timestamp": 5, "input_length": 5, "output_length": 3, "hash_ids": [1]}\n',
     "line 1: bad timestamp Infinity: expected milliseconds from 0 to 3153600000000 from trace start"),
    ("far.jsonl", b'{"timestamp": 1e20, "input_length": 5, "output_length": 3, "hash_ids": []}\n'
                  b'{"timestamp": 5, "input_length": 5, "output_length": 3, "hash_ids": [1]}\n',
     "line 1: bad timestamp 1e+20: expected milliseconds from 0 to 3153600000000 from trace start"),
    ("burst.csv", (BURST + "99999999999999999999,ChatGPT,10,20,30,Conversation log\n"
                   "5,ChatGPT,10,20,30,Conversation log\n").encode(),
     "line 2: bad Timestamp '99999999999999999999': expected seconds from 0 to 3153600000 from trace start"),
]


@pytest.mark.parametrize(("name", "content", "reason"), REJECTED, ids=[r[0] for r in REJECTED])
def test_a_bad_traffic_row_is_a_reject_and_the_rest_is_stored(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                              tmp_path: Path, name: str, content: bytes,
                                                              reason: str | None) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run(capsys, "--db", str(fleet_db), "ingest", "traffic", str(path))
    assert code == 0, err
    stored, rejected = (1, 1) if reason else (2, 0)
    assert f"read 2, stored {stored}, rejected {rejected}, duplicates 0" in out
    if reason:
        assert f"  {reason}\n" in out


# -- what a careless operator or a hostile file can hand any command: each one line, exit 2 -----------------------

BIG_INT = "9" * 5000          # more digits than Python reads as an integer (4,300)
BIG_FLOAT = "1" * 400 + ".5"  # more than a float holds (308 digits)
FLEET_TEXT = (REPO / "examples" / "fleet.yaml").read_text()
SAMPLE = str(REPO / "examples" / "traffic" / "sample.csv")
CANDIDATE = str(REPO / "examples" / "candidates" / "sla_cost.yaml")
DCGM = (REPO / "normalizers" / "profiles" / "dcgm.yaml").read_text()


def parquet(**columns: object) -> bytes:
    import io

    import polars as pl
    buf = io.BytesIO()
    pl.DataFrame(columns).write_parquet(buf)
    return buf.getvalue()


def unwritable_folder(tmp: Path) -> Path:
    """A folder this process cannot create files in: sysfs for root (whom permissions do not stop)."""
    if os.geteuid() == 0:
        return Path("/sys")
    folder = tmp / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


# (id, file name, content (bytes, or "fifo"), argv with {path}, {db} and {tmp}, what the one line says)
UNUSABLE: list[tuple[str, str, bytes | str, str, str]] = [
    ("registry-int", "f.yaml", FLEET_TEXT.replace("version: 1", f"version: {BIG_INT}", 1).encode(),
     "registry validate {path}", "f.yaml:4: version: expected a number, got 99999999999999999999...9999999999 "
                                 "(5,000 characters), too long to be one"),
    ("registry-float", "f.yaml", FLEET_TEXT.replace("version: 1", f"version: {BIG_FLOAT}", 1).encode(),
     "registry validate {path}", "f.yaml:4: version: "),
    ("candidate-int", "c.yaml",
     f"name: x\npolicy: sla_cost\npools:\n  h100-a: {{replicas_scale: {BIG_INT}}}\n".encode(),
     "--db {db} replay run --candidate {path} --traffic " + SAMPLE, "c.yaml:4: pools.h100-a.replicas_scale: "),
    ("gate-int", "g.yaml", f"max_cost_increase_pct: {BIG_INT}\n".encode(),
     "--db {db} replay run --candidate " + CANDIDATE + " --baseline " + CANDIDATE + " --traffic " + SAMPLE +
     " --gate {path}",
     "g.yaml:1: max_cost_increase_pct: expected a number"),
    ("rules-int", "r.yaml", f"version: 1\ntemperature: {{warning: {BIG_INT}}}\n".encode(),
     "--db {db} alerts --rules {path}", "r.yaml:2: temperature.warning: expected a number"),
    ("grid-int", "grid.yaml", f"parameters:\n  pools.h100-a.replicas_scale: [{BIG_INT}]\n".encode(),
     "--db {db} replay sweep --candidate " + CANDIDATE + " --grid {path} --traffic " + SAMPLE, "grid.yaml:2: "),
    ("profile-int", "dcgm.yaml", DCGM.replace("9223372036854775792", BIG_INT).encode(),
     "profile validate {path}", "dcgm.yaml:23: sentinels[0].at_or_above: expected a number, got 9999"),
    ("serve-int", "s.yaml", ("collectors:\n  - {name: a, kind: scrape, url: 'http://127.0.0.1:9/metrics'}\n"
                             f"feed: {{port: {BIG_INT}}}\n").encode(),
     "--db {db} serve --config {path}", "s.yaml:3: feed.port: expected"),
    ("yaml-fifo", "fifo.yaml", "fifo", "registry validate {path}", "fifo.yaml: is a FIFO, expected a YAML file"),
    ("yaml-device", "", b"", "registry validate /dev/zero", "/dev/zero: is a device, expected a YAML file"),
    ("parquet-binary", "t.parquet", parquet(arrival_ms=[1_764_000_000_000], in_tokens=[b"\x01"], out_tokens=[3]),
     "--db {db} ingest traffic {path}", "column 'in_tokens' is Binary; expected numbers or text"),
    ("parquet-list", "t.parquet", parquet(arrival_ms=[1_764_000_000_000], in_tokens=[[1, 2]], out_tokens=[3]),
     "--db {db} ingest traffic {path}", "column 'in_tokens' is List(Int64); expected numbers or text"),
    ("db-missing-folder", "", b"", "--db {tmp}/nope/x.duckdb init", "/nope' does not exist"),
    ("db-under-a-file", "afile", b"", "--db {path}/x.duckdb init", "afile' is not a folder"),
    ("db-unwritable-folder", "", b"", "--db {locked}/x.duckdb init", "is not writable"),
]


@pytest.mark.parametrize(("name", "content", "argv", "said"), [u[1:] for u in UNUSABLE], ids=[u[0] for u in UNUSABLE])
def test_every_unusable_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                     tmp_path: Path, name: str, content: bytes | str, argv: str,
                                                     said: str) -> None:
    path = tmp_path / (name or "unused")
    if content == "fifo":
        os.mkfifo(path)
    elif name:
        path.write_bytes(content if isinstance(content, bytes) else b"")
    locked = unwritable_folder(tmp_path) if "{locked}" in argv else tmp_path
    words = argv.format(path=path, db=fleet_db, tmp=tmp_path, locked=locked).split()
    code, _, err = run(capsys, *words)
    assert code == 2 and said in err, err[:600]
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_roles_with_a_huge_number_name_the_line() -> None:
    from access.roles import load_roles_text
    from pool_registry import ConfigError
    with pytest.raises(ConfigError, match=r"^roles\.yaml:1: version: expected a number, got 9999"):
        load_roles_text(f"version: {BIG_INT}\ndefault: viewer\n", "roles.yaml")


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
from app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_disk_full_at_commit_is_one_line_and_leaves_the_store_as_it_was(fleet_db: Path) -> None:
    exporter = REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom"
    done = subprocess.run([sys.executable, "-c", FULL_DISK, "--db", str(fleet_db), "ingest", "file", str(exporter)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == "hetpool: error: cannot commit to the database: file too large; nothing of this " \
                                  "was stored"
    con = duckdb.connect(str(fleet_db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM samples").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM ingest_runs").fetchone() == (0,)
    finally:
        con.close()
