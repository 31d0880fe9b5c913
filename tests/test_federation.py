"""A second hetpool reading the first one's feed back (`--canonical`) serves the same series, value for value."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from app.serve.feed import FeedServer, store_reader
from canonical.feednames import ERRORS_SAMPLE
from store import Store
from tests.cli import run

OWN = "hetpool_feed"  # the feed's own counts of what it served and dropped, not series of the store


def _served(db: Path) -> list[str]:
    """The sample lines a feed of `db` serves with their timestamps, sorted, without the feed's own series."""
    server = FeedServer("127.0.0.1", 0, store_reader(Store(db)), refresh_s=0.0).start()
    try:
        with urllib.request.urlopen(f"{server.url}/metrics?timestamps=1", timeout=30) as resp:
            text = resp.read().decode()
    finally:
        server.stop()
    return sorted(line for line in text.splitlines() if line and not line.startswith(("#", OWN)))


def test_the_demos_whole_feed_comes_back_series_for_series(demo_db: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    first = _served(demo_db)
    feed = tmp_path / "first.prom"
    feed.write_text("\n".join(first) + "\n")
    second_db = tmp_path / "second.duckdb"
    fleet = demo_db.with_name(demo_db.stem + ".fleet.yaml")
    assert run(capsys, "--db", str(second_db), "registry", "load", str(fleet))[0] == 0
    code, out, err = run(capsys, "--db", str(second_db), "ingest", "file", "--canonical", str(feed))
    assert code == 0, err
    assert "rejected 0" in out, out
    second = _served(second_db)
    assert second == first
    # the demo's devices report errors of one class under two codes at once (an XID and an ECC counter): the
    # store folds such an incident into one event, the feed splits it by code, and the way back keeps it split
    codes = {line.split('code="')[1].split('"')[0] for line in first if line.startswith(ERRORS_SAMPLE)}
    assert len(codes) >= 2, codes
