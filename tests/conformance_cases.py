"""Conformance cases written from the OpenMetrics 1.0 and Prometheus text format 0.0.4 specifications.

At least one valid and one invalid case per rule. An invalid case names the rule `hetpool check` reports and the
line it reports it on; `ingest` marks the invalid values ingest rejects (the lines it rejects).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One exposition text: valid, or which rule it breaks on which line."""

    id: str
    text: str
    rule: str | None = None  # None: valid
    line: int | None = None
    om: bool = True           # OpenMetrics (ends in # EOF) or Prometheus text
    ingest: tuple[int, ...] = ()  # lines ingest rejects for their values
    lax: bool = False  # prometheus_client's OpenMetrics parser lets it pass (the ABNF does not)

    @property
    def valid(self) -> bool:
        """True for a valid case."""
        return self.rule is None


def om(*lines: str) -> str:
    """An OpenMetrics exposition of these lines."""
    return "".join(f"{line}\n" for line in lines) + "# EOF\n"


def prom(*lines: str) -> str:
    """A Prometheus text exposition of these lines."""
    return "".join(f"{line}\n" for line in lines)


H = ("# TYPE h histogram",)
HOK = (*H, 'h_bucket{le="1"} 1', 'h_bucket{le="+Inf"} 2', "h_count 2", "h_sum 3.5")

OM_VALID = [
    Case("gauge", om("# TYPE a gauge", "# HELP a help", "a 1", 'a{x="y"} 2.5')),
    Case("no metadata", om("a 1", "b 2")),
    Case("metadata in any order", om("# UNIT a_seconds seconds", "# HELP a_seconds h", "# TYPE a_seconds gauge",
                                     "a_seconds 1")),
    Case("empty help", om("# HELP a ", "a 1")),
    Case("help escapes", om('# HELP a x\\\\y\\n\\"z\\" \\q', "a 1")),
    Case("empty unit", om("# UNIT a ", "a 1")),
    Case("empty label set", om("a{} 1")),
    Case("label escapes", om('a{x="\\\\",y="\\"",z="\\n"} 1')),
    Case("unknown escape kept", om('a{foo="b\\\\a\\z"} 1')),
    Case("unknown escape at the start", om('a{foo="\\foo"} 1')),
    Case("windows path and regex", om('a{path="C:\\Temp\\x",re="^a\\.b$"} 1')),
    Case("unicode label value and help", om("# HELP a 温度 °C", 'a{x="日本 ü"} 1')),
    Case("empty label value", om('a{x=""} 1')),
    Case("colons in names", om("# TYPE vllm:x gauge", "vllm:x 1")),
    Case("values", om("a{v=\"1\"} -1", 'a{v="2"} 1.5e3', 'a{v="3"} .5', 'a{v="4"} 1.', 'a{v="5"} +Inf',
                      'a{v="6"} -Inf', 'a{v="7"} NaN', 'a{v="8"} 0', 'a{v="9"} -0.0', 'a{v="10"} 1E-3')),
    Case("integer timestamp", om("a 1 1520879607")),
    Case("float timestamp", om("a 1 1520879607.789")),
    Case("negative timestamp", om("a 1 -1.5")),
    Case("timestamps increase", om("a 1 1", "a 2 2")),
    Case("several metrics with timestamps", om('a{x="1"} 1 10', 'a{x="1"} 2 20', 'a{x="2"} 1 5')),
    Case("counter", om("# TYPE c counter", "# HELP c help", "c_total 0", "c_created 1520430000.123")),
    Case("counter with labels and exemplar", om("# TYPE c counter", 'c_total{a="b"} 17 # {trace_id="x"} 1 1.5e9')),
    Case("counter with unit", om("# TYPE c_seconds counter", "# UNIT c_seconds seconds", "c_seconds_total 4.5")),
    Case("histogram", om(*HOK)),
    Case("histogram with created and exemplars", om(*H, 'h_bucket{le="0.1"} 8 # {id="a"} 0.05 123',
                                                   'h_bucket{le="+Inf"} 17 # {} 2', "h_count 17", "h_sum 324",
                                                   "h_created 1520430000.123")),
    Case("histogram without sum and count", om(*H, 'h_bucket{le="+Inf"} 0')),
    Case("histogram with negative buckets, no sum", om(*H, 'h_bucket{le="-1"} 1', 'h_bucket{le="+Inf"} 3')),
    Case("histogram label sets", om(*H, 'h_bucket{a="1",le="+Inf"} 1', 'h_count{a="1"} 1', 'h_sum{a="1"} 1',
                                    'h_bucket{a="2",le="+Inf"} 0', 'h_count{a="2"} 0', 'h_sum{a="2"} 0')),
    Case("gaugehistogram", om("# TYPE g gaugehistogram", 'g_bucket{le="-1"} 1', 'g_bucket{le="+Inf"} 2',
                              "g_gcount 2", "g_gsum -5")),
    Case("summary", om("# TYPE s summary", 's{quantile="0.5"} 3', 's{quantile="1"} 9', "s_count 7", "s_sum 40",
                       "s_created 1.5e9")),
    Case("summary without quantiles", om("# TYPE s summary", "s_count 0", "s_sum 0")),
    Case("stateset", om("# TYPE s stateset", 's{s="a"} 1', 's{s="b"} 0', 's{other="x",s="a"} 0')),
    Case("info", om("# TYPE i info", 'i_info{version="1.2"} 1')),
    Case("unknown type", om("# TYPE u unknown", "u 3")),
    Case("two families", om("# TYPE a gauge", "a 1", "# TYPE b counter", "b_total 2")),
    Case("a name like a suffix of a gauge", om("# TYPE a gauge", "a 1", "a_total 2")),
    Case("no final newline after EOF", om("a 1")[:-1]),
    Case("only EOF", om()),
]

OM_INVALID = [
    Case("missing value", om("a"), "syntax", 1),
    Case("two spaces before value", om("a  1"), "syntax", 1),
    Case("trailing space", om("a 1 "), "syntax", 1),
    Case("tab separator", om("a\t1"), "syntax", 1),
    Case("leading space", om(" a 1"), "syntax", 1),
    Case("bad metric name", om("0a 1"), "syntax", 1),
    Case("trailing comma", om('a{x="1",} 1'), "syntax", 1),
    Case("leading comma", om('a{,x="1"} 1'), "syntax", 1),
    Case("space after comma", om('a{x="1", y="2"} 1'), "syntax", 1, lax=True),
    Case("space before equals", om('a{x ="1"} 1'), "syntax", 1, lax=True),
    Case("unquoted label value", om("a{x=1} 1"), "syntax", 1),
    Case("unterminated label value", om('a{x="1} 1'), "syntax", 1),
    Case("missing closing brace", om('a{x="1" 1'), "syntax", 1),
    Case("bad label name", om('a{0x="1"} 1'), "syntax", 1),
    Case("duplicate label", om('a{x="1",x="2"} 1'), "label", 1),
    Case("reserved label name", om('a{__x="1"} 1'), "label", 1),
    Case("metric name as a label", om('a{__name__="b"} 1'), "label", 1),
    Case("reserved exemplar label", om("# TYPE c counter", 'c_total 1 # {__t="x"} 1'), "label", 2),
    Case("value with underscore", om("a 1_000"), "value", 1),
    Case("hex value", om("a 0x10"), "value", 1),
    Case("word value", om("a many"), "value", 1),
    Case("exponent without digits", om("a 1e"), "value", 1),
    Case("NaN timestamp", om("a 1 NaN"), "timestamp", 1),
    Case("Inf timestamp", om("a 1 +Inf"), "timestamp", 1),
    Case("timestamp with underscore", om("a 1 1_520"), "timestamp", 1),
    Case("two timestamps", om("a 1 2 3"), "syntax", 1),
    Case("TYPE after samples", om("a 1", "# TYPE a gauge"), "metadata-order", 2),
    Case("HELP after samples", om("# TYPE a gauge", "a 1", "# HELP a late"), "metadata-order", 3),
    Case("two TYPEs", om("# TYPE a gauge", "# TYPE a gauge", "a 1"), "metadata-duplicate", 2),
    Case("two HELPs", om("# HELP a x", "# HELP a y", "a 1"), "metadata-duplicate", 2),
    Case("two UNITs", om("# UNIT a_s s", "# UNIT a_s s", "a_s 1"), "metadata-duplicate", 2),
    Case("unknown type", om("# TYPE a meter", "a 1"), "type", 1),
    Case("untyped is Prometheus only", om("# TYPE a untyped", "a 1"), "type", 1),
    Case("type in capitals", om("# TYPE a Gauge", "a 1"), "type", 1),
    Case("HELP without text", om("# HELP a", "a 1"), "metadata", 1),
    Case("TYPE without type", om("# TYPE a", "a 1"), "metadata", 1),
    Case("plain comment", om("# hello", "a 1"), "comment", 1),
    Case("lone hash", om("#", "a 1"), "comment", 1),
    Case("bad name in TYPE", om("# TYPE 0a gauge", "a 1"), "metadata", 1),
    Case("unit not the name's suffix", om("# TYPE a gauge", "# UNIT a seconds", "a 1"), "unit", 2),
    Case("unit of an info", om("# TYPE i_s info", "# UNIT i_s s", 'i_s_info{a="b"} 1'), "unit", 2),
    Case("unit of a stateset", om("# TYPE s_x stateset", "# UNIT s_x x", 's_x{s_x="a"} 1'), "unit", 2),
    Case("family interleaved", om("# TYPE a gauge", "a 1", "b 1", "a 2"), "family-interleaved", 4),
    Case("metadata of an ended family", om("a 1", "b 1", "# HELP a late"), "family-interleaved", 3),
    Case("counter sample without _total", om("# TYPE c counter", "c 1"), "suffix", 2),
    Case("histogram sample without suffix", om(*H, "h 1"), "suffix", 2),
    Case("info sample without _info", om("# TYPE i info", 'i{a="b"} 1'), "suffix", 2),
    Case("gaugehistogram sample without suffix", om("# TYPE g gaugehistogram", "g 1"), "suffix", 2),
    Case("name clash with a counter", om("# TYPE c counter", "c_total 1", "# TYPE c_total gauge", "c_total 1"),
         "name-clash", 3),
    Case("name clash with a histogram part", om(*HOK, "b 1", "h_count 3"), "name-clash", 7),
    Case("exemplar on a gauge", om("# TYPE a gauge", 'a 1 # {t="x"} 1'), "exemplar", 2),
    Case("exemplar on a histogram count", om(*H, 'h_bucket{le="+Inf"} 1', 'h_count 1 # {t="x"} 1', "h_sum 1"),
         "exemplar", 3),
    Case("exemplar on an untyped metric", om('a 1 # {t="x"} 1'), "exemplar", 1),
    Case("exemplar labels too long", om("# TYPE c counter", f'c_total 1 # {{t="{"x" * 128}"}} 1'), "exemplar", 2),
    Case("exemplar without value", om("# TYPE c counter", 'c_total 1 # {t="x"}'), "exemplar", 2),
    Case("exemplar without labels", om("# TYPE c counter", "c_total 1 # 1"), "exemplar", 2),
    Case("exemplar with bad value", om("# TYPE c counter", 'c_total 1 # {t="x"} x'), "exemplar", 2),
    Case("exemplar with two spaces", om("# TYPE c counter", 'c_total 1 # {t="x"}  1'), "exemplar", 2),
    Case("label sets interleaved", om('a{x="1"} 1', 'a{x="2"} 1', 'a{x="1"} 2'), "group-interleaved", 3),
    Case("timestamps mixed", om("a 1 1", "a 2"), "timestamp-mixed", 2),
    Case("timestamps go back", om("a 1 2", "a 2 1"), "timestamp-order", 2),
    Case("negative counter", om("# TYPE c counter", "c_total -1"), "counter", 2, ingest=(2,)),
    Case("NaN counter", om("# TYPE c counter", "c_total NaN"), "counter", 2, ingest=(2,)),
    Case("buckets not cumulative", om(*H, 'h_bucket{le="1"} 2', 'h_bucket{le="+Inf"} 1'), "histogram", 3,
         ingest=(2, 3)),
    Case("buckets out of order", om(*H, 'h_bucket{le="2"} 1', 'h_bucket{le="1"} 1', 'h_bucket{le="+Inf"} 1'),
         "histogram", 3, ingest=(2, 3, 4)),
    Case("no +Inf bucket", om(*H, 'h_bucket{le="1"} 1', "h_count 1", "h_sum 1"), "histogram", 2,
         ingest=(2, 3, 4)),
    Case("count is not the +Inf bucket", om(*H, 'h_bucket{le="+Inf"} 2', "h_count 3", "h_sum 1"), "histogram", 3,
         ingest=(2, 3, 4)),
    Case("negative bucket value", om(*H, 'h_bucket{le="1"} -1', 'h_bucket{le="+Inf"} 0'), "histogram", 2,
         ingest=(2, 3)),
    Case("NaN bucket value", om(*H, 'h_bucket{le="+Inf"} NaN'), "histogram", 2, ingest=(2,)),
    Case("bucket without le", om(*H, "h_bucket 1", 'h_bucket{le="+Inf"} 1'), "histogram", 2, ingest=(2, 3)),
    Case("NaN le", om(*H, 'h_bucket{le="NaN"} 1', 'h_bucket{le="+Inf"} 1'), "histogram", 2, ingest=(2, 3)),
    Case("+Inf written otherwise", om(*H, 'h_bucket{le="+inf"} 1'), "histogram", 2),
    Case("fractional bucket count", om(*H, 'h_bucket{le="+Inf"} 1.5'), "histogram", 2),
    Case("fractional count", om(*H, 'h_bucket{le="+Inf"} 1.5', "h_count 1.5", "h_sum 1"), "histogram", 2),
    Case("count without sum", om(*H, 'h_bucket{le="+Inf"} 1', "h_count 1"), "histogram", 2),
    Case("sum without count", om(*H, 'h_bucket{le="+Inf"} 1', "h_sum 1"), "histogram", 2),
    Case("sum with negative buckets", om(*H, 'h_bucket{le="-1"} 1', 'h_bucket{le="+Inf"} 1', "h_count 1",
                                         "h_sum -1"), "histogram", 2),
    Case("negative sum", om(*H, 'h_bucket{le="+Inf"} 1', "h_count 1", "h_sum -1"), "histogram", 4,
         ingest=(2, 3, 4)),
    Case("NaN sum", om(*H, 'h_bucket{le="+Inf"} 1', "h_count 1", "h_sum NaN"), "histogram", 4, ingest=(2, 3, 4)),
    Case("gcount is not the +Inf bucket", om("# TYPE g gaugehistogram", 'g_bucket{le="+Inf"} 2', "g_gcount 1",
                                             "g_gsum 1"), "gaugehistogram", 3, ingest=(2, 3, 4)),
    Case("negative gsum, no negative bucket", om("# TYPE g gaugehistogram", 'g_bucket{le="+Inf"} 2',
                                                 "g_gcount 2", "g_gsum -1"), "gaugehistogram", 4, ingest=(2, 3, 4)),
    Case("gauge histogram without +Inf", om("# TYPE g gaugehistogram", 'g_bucket{le="1"} 2'), "gaugehistogram", 2,
         ingest=(2,)),
    Case("gsum without gcount", om("# TYPE g gaugehistogram", 'g_bucket{le="+Inf"} 2', "g_gsum 1"),
         "gaugehistogram", 2),
    Case("stateset value 2", om("# TYPE s stateset", 's{s="a"} 2'), "stateset", 2, ingest=(2,)),
    Case("stateset without its label", om("# TYPE s stateset", 's{t="a"} 1'), "stateset", 2),
    Case("info value 2", om("# TYPE i info", 'i_info{a="b"} 2'), "info", 2, ingest=(2,)),
    Case("quantile above 1", om("# TYPE s summary", 's{quantile="1.5"} 1'), "summary", 2),
    Case("summary without quantile label", om("# TYPE s summary", "s 1"), "summary", 2),
    Case("negative quantile value", om("# TYPE s summary", 's{quantile="0.5"} -1'), "summary", 2),
    Case("negative summary count", om("# TYPE s summary", "s_count -1", "s_sum 1"), "summary", 2, ingest=(2,)),
    Case("NaN summary sum", om("# TYPE s summary", "s_count 1", "s_sum NaN"), "summary", 3, ingest=(3,)),
    Case("text after EOF", om("a 1") + "b 2\n", "after-eof", 3),
    Case("EOF with a trailing space", "a 1\n# EOF \n", "eof", 2),
    Case("EOF without its space", "a 1\n#EOF\n", "eof", 2),
    Case("blank line after EOF", om("a 1") + "\n", "after-eof", 3),
    Case("blank line", "a 1\n\nb 2\n# EOF\n", "blank-line", 2),
    Case("CR LF", "a 1\r\n# EOF\n", "syntax", 1),
    Case("not UTF-8", "a{x=\"\udcff\"} 1\n# EOF\n", "utf8", 1, lax=True),
]

PROM_VALID = [
    Case("gauge with help and type", prom("# HELP a help", "# TYPE a gauge", "a 1", 'a{x="y"} 2'), om=False),
    Case("comments and blank lines", prom("# a comment", "", "a 1", "   ", "# another"), om=False),
    Case("blanks and tabs", prom("a\t1", "b   2   1700000000000", '  c{x="1"}\t3'), om=False),
    Case("spaces and a trailing comma in labels", prom('a{x="1", y="2",} 1'), om=False),
    Case("unknown escape kept", prom('a{foo="b\\\\a\\z"} 1', 'b{path="C:\\Temp"} 1'), om=False),
    Case("untyped", prom("# TYPE a untyped", "a 1"), om=False),
    Case("help without text", prom("# HELP a", "a 1"), om=False),
    Case("millisecond timestamps", prom("a 1 1723621883587", "b 2 -1723621883587"), om=False),
    Case("counter named with _total", prom("# TYPE c_total counter", "c_total 3"), om=False),
    Case("histogram", prom(*HOK), om=False),
    Case("histogram with sum first", prom(*H, "h_sum 3", 'h_bucket{le="0.5"} 1', 'h_bucket{le="+Inf"} 2',
                                          "h_count 2"), om=False),
    Case("summary", prom("# TYPE s summary", 's{quantile="0.5"} -3', "s_sum -7", "s_count 2"), om=False),
    Case("values", prom("a{v=\"1\"} NaN", 'a{v="2"} +Inf', 'a{v="3"} -Inf', 'a{v="4"} 1e3', 'a{v="5"} .5'),
         om=False),
    Case("a # EOF comment in the middle is not OpenMetrics' end", "a 1\n# EOF comment\nb 2\n", om=False),
]

PROM_INVALID = [
    Case("missing value", prom("a"), "syntax", 1, om=False),
    Case("bad value", prom("a fast"), "value", 1, om=False),
    Case("float timestamp", prom("a 1 1723621883.5"), "timestamp", 1, om=False),
    Case("exemplar", prom('a 1 # {t="x"} 1'), "exemplar", 1, om=False),
    Case("two TYPEs", prom("# TYPE a gauge", "# TYPE a gauge", "a 1"), "metadata-duplicate", 2, om=False),
    Case("two HELPs", prom("# HELP a x", "# HELP a y", "a 1"), "metadata-duplicate", 2, om=False),
    Case("TYPE after samples", prom("a 1", "# TYPE a gauge"), "metadata-order", 2, om=False),
    Case("OpenMetrics-only type", prom("# TYPE a gaugehistogram", "a 1"), "type", 1, om=False),
    Case("TYPE without type", prom("# TYPE a", "a 1"), "type", 1, om=False),
    Case("family interleaved", prom("# TYPE a gauge", "a 1", "b 1", "a 2"), "family-interleaved", 4, om=False),
    Case("series twice", prom('a{x="1"} 1', 'a{x="1"} 2'), "duplicate-series", 2, om=False),
    Case("histogram sample without suffix", prom(*H, "h 1"), "suffix", 2, om=False),
    Case("no +Inf bucket", prom(*H, 'h_bucket{le="1"} 1', "h_count 1", "h_sum 1"), "histogram", 2, om=False,
         ingest=(2, 3, 4)),
    Case("negative counter", prom("# TYPE c_total counter", "c_total -4"), "counter", 2, om=False, ingest=(2,)),
    Case("no final newline", "a 1", "newline", 1, om=False),
    Case("duplicate label", prom('a{x="1",x="2"} 1'), "label", 1, om=False),
    Case("reserved label name", prom('a{__x="1"} 1'), "label", 1, om=False),
]

VALID = OM_VALID + PROM_VALID
INVALID = OM_INVALID + PROM_INVALID
