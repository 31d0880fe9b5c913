"""Inputs that once ended in a traceback or a hang: each is one clear line and exit 2, or a reject naming
the record and a count that still adds up."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

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
