"""Fuzz sweep of exposition text: the streaming parser, the normalizer, the ingest into DuckDB, the CLI.

Seeds are the example and fixture scrapes, the corpus' exposition files (when the corpus is there) and a
scrape written here with exemplars, escapes, duplicate series with different values at one timestamp, a
'# EOF' in the middle and many distinct series. Properties: nothing raises but the layers' own errors; every
sample line read is exactly one sample or one reject, whatever the chunking; and every ingest accounts for
what it read: read = stored + rejected + duplicates + ignored.
"""

from __future__ import annotations

import gzip
import itertools
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.pipeline import IngestOptions, ingest, make_context
from collectors.sources import ExpositionSource, OutOfOrder, one_batch, whole_scrapes
from normalizers import Context, ExpositionParser, Normalizer, RawBatch, load_profiles
from normalizers.normalize import Options
from store import Held, IngestRun, connect
from tests.conftest import REPO
from tests.fuzzing import cases, corpus_files, mutated, repo_files

AT = 1_794_990_000_000
NOW_MS = 1_795_000_000_000
HOST = 'Hostname="h100-a-01"'
WRITTEN = "\n".join([
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",{HOST}}} 40 {AT}',
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",{HOST}}} 41 {AT}',
    f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",{HOST}}} 48 {AT}',
    f'DCGM_FI_DEV_XID_ERRORS{{{HOST},gpu="0"}} 79 {AT}',
    f'DCGM_FI_DEV_FB_USED{{gpu="1",{HOST},modelName="H100 \\"SXM\\"\\n\\\\"}} 1000',
    f'DCGM_FI_DEV_FB_FREE{{gpu="1",{HOST}}} 2000',
    f'DCGM_FI_DEV_FB_RESERVED{{gpu="1",{HOST}}} 48',
    f'DCGM_FI_DEV_POWER_USAGE{{gpu="1",{HOST},label="{"v" * 300}"}} 612.5 {AT / 1000:.3f}',
    *[f'DCGM_FI_DEV_GPU_TEMP{{gpu="{g}",{HOST}}} {60 + g}' for g in range(2, 40)],
    '# TYPE vllm:e2e_request_latency_seconds histogram',
    'vllm:e2e_request_latency_seconds_bucket{le="0.5",model_name="m"} 3 # {trace_id="abc"} 0.4 1794990000.1',
    'vllm:e2e_request_latency_seconds_count{model_name="m"} 3',
    "# EOF",
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="5",{HOST}}} 9',
]).encode() + b"\n"
SEEDS = [WRITTEN, *repo_files("examples/exporters/*.prom", "tests/fixtures/exposition/*.prom"),
         *corpus_files("**/*.prom", limit=4 << 10)]
TEXTS = mutated(SEEDS)
PROFILES = load_profiles()


def parse(data: bytes, cuts: list[int]) -> list[RawBatch]:
    parser = ExpositionParser()
    edges = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    return [*(parser.feed(data[a:b]) for a, b in itertools.pairwise(edges)), parser.finish()]


def expected_reads(data: bytes) -> int:
    """Sample lines as the format defines them: not blank, not a comment, or not UTF-8 at all."""
    n = 0
    for raw in data.split(b"\n"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            n += 1
            continue
        n += bool(text.strip(" \t\r")) and not text.startswith("#")
    return n


def facts(batches: list[RawBatch]) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    rows = sorted((line, key, repr(value), ts) for b in batches
                  for line, key, value, ts in b.samples.select("line", "key", "value", "ts_ms").iter_rows())
    rejects = sorted(tuple(r) for b in batches for r in b.rejects.iter_rows())
    return rows, rejects


@cases(150, path="exposition", sweep=7000)
@given(TEXTS, st.lists(st.integers(0, 1 << 20), max_size=3))
def test_parser_reads_every_line_once_in_any_chunking(data: bytes, cuts: list[int]) -> None:
    if len(data) > 1 << 20:  # a line longer than the parser holds is rejected whatever its text
        data = data[:1 << 20]
    whole = parse(data, [])
    rows, rejects = facts(whole)
    lines = [r[0] for r in rows] + [r[0] for r in rejects]
    assert len(lines) == len(set(lines)) == expected_reads(data)
    assert all(isinstance(reason, str) and reason for _, _, reason in rejects)
    assert facts(parse(data, cuts)) == (rows, rejects)


def context() -> Context:
    return Context(PROFILES, pool="p", node="n1")


@cases(50, path="exposition", sweep=2500)
@given(TEXTS)
def test_normalizer_accounts_for_every_sample(data: bytes) -> None:
    parser = ExpositionParser()
    try:  # as the pipeline does: input whose timestamps go back in time is taken in as one batch
        batches = list(whole_scrapes(iter([parser.feed(data)]), parser.finish, AT))
    except OutOfOrder:
        parser = ExpositionParser()
        batches = list(one_batch(iter([parser.feed(data)]), parser.finish))
    normalizer = Normalizer(context(), Options(default_ts_ms=AT, now_ms=NOW_MS))
    for batch in batches:
        if not batch.samples.height:
            continue
        out = normalizer.normalize(batch)
        kept = int(out.samples.get_column("n_src").sum())
        assert batch.samples.height == kept + out.rejects.height + out.folded + out.ignored
        assert out.samples.null_count().sum_horizontal().item() == 0


class RolledBack(Exception):
    """Raised inside the commit, after the run is written, so that the next case sees an empty store."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Held:
    con = connect(tmp_path_factory.mktemp("fuzz") / "fuzz.duckdb")
    return Held(con)


@cases(15, path="exposition", sweep=500)
@given(data=TEXTS)
def test_ingest_into_duckdb_accounts_for_every_line(store: Held, data: bytes) -> None:
    def check(con: duckdb.DuckDBPyConnection, run: IngestRun) -> None:
        c = run.counts
        assert c.read == c.stored + c.rejected + c.duplicates + c.ignored == expected_reads(data)
        stored = con.execute("SELECT count(*) FROM samples").fetchall()[0][0]
        assert stored <= c.stored  # a derived row stands for several records
        raise RolledBack

    options = IngestOptions(pool="p", node="n1", at_ms=AT)
    with pytest.raises(RolledBack):
        ingest(store, ExpositionSource("file", "x.prom", [data]), options=options, clock=lambda: NOW_MS / 1000,
               context=make_context(store, options, PROFILES), hooks=[check])


@pytest.mark.parametrize("seed", range(3))
def test_cli_ingest_of_a_mutated_file_exits_0_or_2(fleet_db: Path, tmp_path: Path, seed: int) -> None:
    data = _cli_input(seed)
    path = tmp_path / ("x.prom.gz" if seed == 2 else "x.prom")
    path.write_bytes(data)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "--db", str(fleet_db), "--json", "ingest", "file",
                           str(path), "--at", "2026-11-20T00:00:00Z"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode in (0, 2), done.stderr
    assert "Traceback" not in done.stderr
    if done.returncode == 2:
        assert len(done.stderr.strip().splitlines()) == 1


def _cli_input(seed: int) -> bytes:
    """Three inputs: cut mid-line with a NUL and bad bytes, a repeated scrape in CRLF, a .gz cut short."""
    if seed == 0:
        return WRITTEN[:700] + b"\x00\xff\xfe" + WRITTEN[700:1500]
    if seed == 1:
        return (WRITTEN * 2).replace(b"\n", b"\r\n")
    return gzip.compress(WRITTEN)[:-9]
