"""Values a family's # TYPE does not allow are rejects with line and reason, whatever the chunking."""

from __future__ import annotations

import itertools

import pytest

from collectors.sources import ExpositionSource

H = "# TYPE h histogram\n"
G = "# TYPE g gaugehistogram\n"
GOOD_H = H + 'h_bucket{le="1"} 1\nh_bucket{le="2"} 3\nh_bucket{le="+Inf"} 4\nh_sum 5.5\nh_count 4\n'

# (name, text, rejected lines, part of the reason)
INVALID: list[tuple[str, str, list[int], str]] = [
    ("negative counter", "# TYPE c counter\nc_total -1\nc_total 2\n", [2], "counter value is -1, negative"),
    ("NaN counter", "# TYPE c counter\nc_total{a=\"x\"} NaN\n", [2], "counter value is NaN"),
    ("negative counter without _total", "# TYPE c counter\nc -3\n", [2], "counter value is -3"),
    ("stateset 2", "# TYPE s stateset\ns{s=\"a\"} 2\ns{s=\"b\"} 0\n", [2], "stateset value 2 is not 0 or 1"),
    ("info 0", "# TYPE i info\ni_info{v=\"1\"} 0\n", [2], "info value 0 is not 1"),
    ("negative summary count", "# TYPE q summary\nq{quantile=\"0.5\"} -1\nq_count -2\nq_sum 1\n", [3],
     "summary _count is -2"),
    ("NaN summary sum", "# TYPE q summary\nq_count 2\nq_sum NaN\n", [3], "summary _sum is NaN"),
    ("not cumulative", H + 'h_bucket{le="1"} 3\nh_bucket{le="2"} 2\nh_bucket{le="+Inf"} 3\nh_count 3\n',
     [2, 3, 4, 5], "buckets are cumulative"),
    ("out of order", H + 'h_bucket{le="2"} 1\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\n', [2, 3, 4],
     "increasing order of le"),
    ("no +Inf", H + 'h_bucket{le="1"} 1\nh_count 1\nh_sum 1\n', [2, 3, 4], 'no le="+Inf" bucket'),
    ("count differs", H + 'h_bucket{le="+Inf"} 4\nh_count 5\nh_sum 1\n', [2, 3, 4],
     'but the le="+Inf" bucket (line 2) holds 4'),
    ("negative bucket value", H + 'h_bucket{le="1"} -1\nh_bucket{le="+Inf"} 0\n', [2, 3], "never below 0"),
    ("NaN bucket", H + 'h_bucket{le="1"} NaN\nh_bucket{le="+Inf"} 0\n', [2, 3], "holds NaN"),
    ("bucket without le", H + 'h_bucket 1\nh_bucket{le="+Inf"} 1\n', [2, 3], "no numeric le"),
    ("NaN le", H + 'h_bucket{le="NaN"} 1\nh_bucket{le="+Inf"} 1\n', [2, 3], "no numeric le"),
    ("negative sum", H + 'h_bucket{le="+Inf"} 1\nh_count 1\nh_sum -2\n', [2, 3, 4], "no bucket bound is negative"),
    ("NaN sum", H + 'h_bucket{le="+Inf"} 1\nh_count 1\nh_sum NaN\n', [2, 3, 4], "_sum is NaN"),
    ("gauge histogram gcount", G + 'g_bucket{le="+Inf"} 2\ng_gcount 3\ng_gsum 1\n', [2, 3, 4], "_gcount is 3"),
    ("gauge histogram not cumulative", G + 'g_bucket{le="0"} 2\ng_bucket{le="+Inf"} 1\n', [2, 3], "cumulative"),
    ("gauge histogram negative gsum", G + 'g_bucket{le="1"} 2\ng_bucket{le="+Inf"} 2\ng_gsum -1\n', [2, 3, 4],
     "_gsum is -1"),
    ("one bad histogram among good ones",
     GOOD_H.replace("h_count 4\n", 'h_count 4\nh_bucket{a="b",le="+Inf"} 1\nh_count{a="b"} 2\n'), [7, 8],
     "_count is 2"),
    ("only _count, no bucket", H + 'h_count{a="x"} 8060\n', [2], 'no le="+Inf" bucket'),
]
VALID: list[tuple[str, str, int]] = [
    ("histogram", GOOD_H, 5),
    ("sum first, as sglang writes it", H + 'h_sum 3\nh_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 2\nh_count 2\n', 4),
    ("negative bounds may have a negative sum", H + 'h_bucket{le="-1"} 1\nh_bucket{le="+Inf"} 2\nh_sum -4\n', 3),
    ("two label sets, timestamps", H + 'h_bucket{a="1",le="+Inf"} 2 1000\nh_count{a="1"} 2 1000\n'
     'h_bucket{a="2",le="+Inf"} 0 1000\nh_count{a="2"} 0 1000\n', 4),
    ("two scrapes of one histogram", H + 'h_bucket{le="+Inf"} 2 1000\nh_count 2 1000\n'
     'h_bucket{le="+Inf"} 3 2000\nh_count 3 2000\n', 4),
    ("counter, created, stateset, info, summary",
     "# TYPE c counter\nc_total 0\nc_created 1.7e9\n# TYPE s stateset\ns{s=\"a\"} 1\ns{s=\"b\"} 0\n"
     "# TYPE i info\ni_info{v=\"1\"} 1\n# TYPE q summary\nq{quantile=\"0.5\"} -3\nq{quantile=\"0.9\"} NaN\n"
     "q_sum -7\nq_count 2\n", 9),
    ("gauge histogram with negative gsum and bounds", G + 'g_bucket{le="-1"} 1\ng_bucket{le="+Inf"} 2\n'
     "g_gcount 2\ng_gsum -3\n", 4),
    ("a gauge may be anything", "# TYPE t gauge\nt -1\nt{a=\"b\"} NaN\n", 2),
    ("untyped histogram parts are not checked", 'u_bucket{le="1"} 5\nu_count 3\n', 2),
]


def read(text: str, cuts: tuple[int, ...] = ()) -> tuple[list[int], list[tuple[int, str]]]:
    """The lines of the samples kept, and (line, reason) of each reject, from the chunks between the cuts."""
    data = text.encode()
    edges = [0, *cuts, len(data)]
    source = ExpositionSource("file", "t.prom", [data[a:b] for a, b in itertools.pairwise(edges)])
    kept, rejects = [], []
    for batch in source.batches(1_700_000_000_000):
        kept += batch.samples.get_column("line").to_list()
        rejects += [(line, reason) for line, _, reason in batch.rejects.iter_rows()]
    return sorted(kept), sorted(rejects)


@pytest.mark.parametrize("name, text, lines, reason", INVALID, ids=[c[0] for c in INVALID])
def test_type_invalid_values_are_rejects_in_any_chunking(name: str, text: str, lines: list[int],
                                                         reason: str) -> None:
    samples = [n for n, line in enumerate(text.splitlines(), 1) if line and not line.startswith("#")]
    for cut in range(len(text.encode()) + 1):
        kept, rejects = read(text, (cut,))
        assert [line for line, _ in rejects] == lines, (cut, rejects)
        assert all(reason in r for _, r in rejects), rejects
        assert kept == [n for n in samples if n not in lines]


@pytest.mark.parametrize("name, text, n", VALID, ids=[c[0] for c in VALID])
def test_valid_values_are_kept_in_any_chunking(name: str, text: str, n: int) -> None:
    for cut in range(len(text.encode()) + 1):
        kept, rejects = read(text, (cut,))
        assert rejects == [] and len(kept) == n, (cut, rejects)


@pytest.mark.slow  # every triple of cut points of every case
def test_three_cuts() -> None:
    text = INVALID[7][1] + GOOD_H.replace("h", "k")
    whole = read(text)
    for cuts in itertools.combinations(range(0, len(text), 7), 3):
        assert read(text, cuts) == whole


def test_repeated_lines_are_left_to_the_duplicate_check() -> None:
    kept, rejects = read(GOOD_H + 'h_bucket{le="1"} 1\n')
    assert rejects == [] and len(kept) == 6
