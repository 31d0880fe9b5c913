"""hetpool ingest prometheus from the command line: its help, its README section and one-line usage errors
(the pulls themselves run against a real Prometheus in tests/test_prometheus.py and tests/test_canonical_pull.py)."""

from __future__ import annotations

import pytest

from tests.cli import run
from tests.conftest import REPO


def test_the_help_says_what_canonical_and_step_store_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ingest", "prometheus", "--help")
    text = " ".join(out.split())
    assert code == 0 and "--canonical" in text
    assert "with --canonical also the resolution stored: one sample per step" in text
    assert "with --step 1m raw 15 s series stay in the TSDB and the store holds canonical minutes" in text
    example = out[out.index("example:"):]
    assert "hetpool ingest prometheus --url http://prometheus:9090 --canonical --step 1m" in example


def test_the_readme_ingest_section_covers_canonical_input() -> None:
    readme = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    head = "### `hetpool ingest prometheus|scrape|file --canonical`"
    assert head in readme
    section = readme[readme.index(head):].split("\n### ", 1)[0]
    flat = " ".join(section.split())
    for needle in ("accelerator_errors_total{error_class,severity,code}", "accelerator_error_state",
                   "hetpool_software_version_info{component,version}", "one sample per `--step`",
                   "With `--step 1m` the raw 15 s series stay in the TSDB", "kill -9",
                   "hetpool ingest prometheus --url http://prometheus:9090 --canonical --step 1m"):
        assert needle in flat, needle


@pytest.mark.parametrize("args", [["--pool", "h100-a"], ["--profile", "dcgm"], ["--profiles-dir", "x"]])
def test_canonical_pulls_refuse_the_vendor_options(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, out, err = run(capsys, "ingest", "prometheus", "--url", "http://127.0.0.1:1", "--canonical", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "do not apply with --canonical: canonical series name their pool and need no profile" in err
