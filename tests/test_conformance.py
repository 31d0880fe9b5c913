"""Conformance: every valid case is read whole (by ingest, the same as prometheus_client reads it, and by
`hetpool check`), every invalid case is reported by `check` with its rule and line, and every value its type
does not allow is a reject at ingest, whatever the chunking. Cases: tests/conformance_cases.py."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Enum, Gauge, Histogram, Info, Summary
from prometheus_client import Counter as Counter_
from prometheus_client.exposition import generate_latest as prom_latest
from prometheus_client.openmetrics.exposition import generate_latest as om_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families as prom_families
from prometheus_client.samples import Timestamp

from collectors.sources import ExpositionSource, OutOfOrder
from normalizers.lint import lint
from tests.conformance_cases import INVALID, VALID, Case

Row = tuple[str, tuple[tuple[str, str], ...], object, object]
AT = 1_700_000_000_000


def data(case: Case) -> bytes:
    return case.text.encode("utf-8", "surrogateescape")


def _value(v: float) -> object:
    return "nan" if math.isnan(v) else float(v)


def _ms(ts: Timestamp | float | None) -> int | None:
    if isinstance(ts, Timestamp):
        return ts.sec * 1000 + ts.nsec // 1_000_000
    return None if ts is None else round(float(ts) * 1000)


def reference(case: Case) -> Counter[Row]:
    """Samples as prometheus_client reads them (its OpenMetrics parser, or its text format one)."""
    out: Counter[Row] = Counter()
    for family in (om_families if case.om else prom_families)(case.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())), _value(s.value), _ms(s.timestamp))] += 1
    return out


def ingested(case: Case, cuts: tuple[int, ...] = ()) -> tuple[Counter[Row], list[int]]:
    """Samples and reject lines as ingest reads the case, in chunks cut at `cuts`."""
    raw = data(case)
    edges = [0, *cuts, len(raw)]
    source = ExpositionSource("file", f"{case.id}.prom", [raw[a:b] for a, b in itertools.pairwise(edges)])
    try:
        batches = list(source.batches(AT))
    except OutOfOrder as exc:  # timestamps that go back: read again as one batch, as the pipeline does
        assert exc.whole is not None
        batches = list(exc.whole.batches(AT))
    rows: Counter[Row] = Counter()
    rejects: list[int] = []
    for batch in batches:
        for _, name, labels, value, ts, _ in batch.to_frame().iter_rows():
            rows[(name, tuple(sorted((d["name"], d["value"]) for d in labels)), _value(value), ts)] += 1
        rejects += batch.rejects.get_column("line").to_list()
    return rows, sorted(rejects)


def _same_names(ours: Counter[Row], theirs: Counter[Row]) -> Counter[Row]:
    """The reference with the `_total` its text format parser adds to counters written without it taken off."""
    names = {r[0] for r in ours}
    return Counter({(r[0][:-6] if r[0] not in names and r[0].endswith("_total") else r[0], *r[1:]): n
                    for r, n in theirs.items()})


@pytest.mark.parametrize("case", VALID, ids=[c.id for c in VALID])
def test_valid_input_is_read_whole_and_as_the_reference_reads_it(case: Case) -> None:
    theirs = reference(case)
    ours, rejects = ingested(case)
    assert rejects == []
    assert ours == _same_names(ours, theirs)
    report = lint(data(case))
    assert report.format == ("openmetrics" if case.om else "prometheus")
    assert report.errors == [], report.errors
    assert sum(f.samples for f in report.families) == sum(theirs.values())


@pytest.mark.parametrize("case", INVALID, ids=[c.id for c in INVALID])
def test_invalid_input_is_reported_with_its_rule_and_line(case: Case) -> None:
    report = lint(data(case))
    assert report.format == ("openmetrics" if case.om else "prometheus")
    assert not report.valid
    assert all(p.line is not None for p in report.errors)
    assert (case.rule, case.line) in {(p.rule, p.line) for p in report.errors}, report.errors
    if case.om and not case.lax:  # the reference agrees that it is invalid
        with pytest.raises(ValueError):
            list(om_families(case.text))


def cut_points(raw: bytes) -> list[int]:
    """Each line's start and the byte after it, its middle, and the byte before its newline."""
    out: set[int] = set()
    start = 0
    for end in [i for i, b in enumerate(raw) if b == 10] + [len(raw)]:
        out.update({start, start + 1, (start + end) // 2, max(start, end - 1), end})
        start = end + 1
    return sorted(p for p in out if 0 < p < len(raw))


@pytest.mark.parametrize("case", VALID, ids=[c.id for c in VALID])
def test_valid_input_is_read_whole_in_any_chunking(case: Case) -> None:
    whole = ingested(case)
    assert whole[1] == []
    for cut in cut_points(data(case)):
        assert ingested(case, (cut,)) == whole, cut


TYPE_INVALID = [c for c in INVALID if c.ingest]


@pytest.mark.parametrize("case", TYPE_INVALID, ids=[c.id for c in TYPE_INVALID])
def test_type_invalid_values_are_rejects_at_ingest_in_any_chunking(case: Case) -> None:
    for cut in range(len(data(case)) + 1):
        _, rejects = ingested(case, (cut,))
        assert rejects == list(case.ingest), cut


def test_figures() -> None:
    valid = sum(not lint(data(c)).errors for c in VALID)
    found = sum(any(p.line for p in lint(data(c)).errors) for c in INVALID if c.om)
    om_invalid = sum(c.om for c in INVALID)
    print(f"\nvalid read: {valid}/{len(VALID)}; invalid OpenMetrics reported with a line: {found}/{om_invalid}")
    assert valid == len(VALID)
    assert found >= 0.95 * om_invalid
    rules = {c.rule for c in INVALID}
    assert len(rules) >= 25 and len(VALID) >= 40


def test_strict_reads_prometheus_text_as_openmetrics() -> None:
    report = lint(b"# TYPE a gauge\na 1\n", openmetrics=True)
    assert report.format == "openmetrics" and [p.rule for p in report.errors] == ["eof"]
    assert lint(b"a 1\n", content_type="application/openmetrics-text; version=1.0.0").format == "openmetrics"


_label_values = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=40, deadline=None)
@given(st.lists(_label_values, min_size=1, max_size=4, unique=True),
       st.lists(st.floats(0, 1e6, allow_nan=False), max_size=20), st.booleans())
def test_what_prometheus_client_writes_is_valid_and_read_whole(values: list[str], observations: list[float],
                                                               openmetrics: bool) -> None:
    registry = CollectorRegistry()
    counter = Counter_("jobs", "jobs done", ["v"], registry=registry)
    gauge = Gauge("temp_celsius", "temperature", ["v"], unit="celsius", registry=registry)
    histogram = Histogram("latency_seconds", "latency", ["v"], registry=registry)
    summary = Summary("size_bytes", "size", ["v"], registry=registry)
    Info("build", "build info", registry=registry).info({"version": values[0]})
    Enum("state", "state", states=["a", "b"], registry=registry).state("b")
    for i, v in enumerate(values):
        counter.labels(v).inc(i)
        gauge.labels(v).set(-i)
        for x in observations:
            histogram.labels(v).observe(x)
            summary.labels(v).observe(x)
    text = (om_latest if openmetrics else prom_latest)(registry).decode()
    case = Case("generated", text, om=openmetrics)
    report = lint(data(case))
    assert report.errors == [] and report.format == ("openmetrics" if openmetrics else "prometheus")
    ours, rejects = ingested(case)
    assert rejects == [] and ours == _same_names(ours, reference(case))
