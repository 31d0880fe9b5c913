"""The exposition linter as a unit: each rule of the Prometheus text format and of OpenMetrics broken once, with
the line and rule it must name (the conformance suite runs the published cases; these are written by hand)."""

from __future__ import annotations

import pytest

from normalizers.lint import lint

CASES = [
    # (input, format it is read as, [(line, rule)] expected)
    (b"# TYPE a gauge\na 1\n", "prometheus", []),
    (b"# TYPE a gauge\na 1\n# TYPE a gauge\n", "prometheus", [(3, "metadata-order"), (3, "metadata-duplicate")]),
    (b'a 1\nb 1\na{x="1"} 2\n', "prometheus", [(3, "family-interleaved")]),
    (b"a 1\na 2\n", "prometheus", [(2, "duplicate-series")]),
    (b"a 1 12.5\n", "prometheus", [(1, "timestamp")]),          # milliseconds are an integer
    (b'a{x="1",x="2"} 1\n', "prometheus", [(1, "label")]),
    (b"# TYPE a gauge\na 1\n# EOF\na 2\n", "openmetrics", [(4, "after-eof")]),
    (b"# TYPE c counter\nc 1\n# EOF\n", "openmetrics", [(2, "suffix")]),  # a counter's sample is c_total
    (b'# TYPE h histogram\nh_bucket{le="1"} 3\nh_bucket{le="+Inf"} 2\nh_count 2\nh_sum 1\n# EOF\n', "openmetrics",
     [(3, "histogram")]),                                        # buckets are cumulative
]


@pytest.mark.parametrize("data, fmt, expected", CASES, ids=[c[0].decode()[:32] for c in CASES])
def test_each_broken_rule_is_named_at_its_line(data: bytes, fmt: str, expected: list[tuple[int, str]]) -> None:
    report = lint(data)
    assert report.format == fmt
    assert [(p.line, p.rule) for p in report.errors] == expected
    for p in report.errors:
        assert p.message and p.text is not None


def test_the_content_type_or_strict_flag_chooses_openmetrics() -> None:
    assert lint(b"a 1\n", content_type="application/openmetrics-text; version=1.0.0").format == "openmetrics"
    assert lint(b"# TYPE a gauge\na 1\n", openmetrics=True).format == "openmetrics"
    assert lint(b"# TYPE a gauge\na 1\n").format == "prometheus"
