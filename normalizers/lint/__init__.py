"""`hetpool check`'s linter: is an exporter's output valid exposition, and which families does it deliver?

Input with a `# EOF` line (or served as application/openmetrics-text, or read with --strict) is checked as
OpenMetrics 1.0: metadata (TYPE, UNIT, HELP) at most once each and before the family's samples; a family's
lines in one group and each metric's (label set's) samples together; sample names by type; exemplars only on
buckets and counters; timestamps present for all of a metric's samples or none, never going back; values as
the type allows (`lint.rules`); nothing after `# EOF`. Other input is checked as the Prometheus text format
0.0.4: TYPE and HELP at most once and before the samples, families in one group, no repeated series, integer
millisecond timestamps, the same value rules. Every problem has its line, its rule and the offending text.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from canonical.prometheus import family_of
from normalizers.lint.line import NAME, Bad, Sample, om_sample, prom_sample
from normalizers.lint.rules import OM_SUFFIXES, PROM_SUFFIXES, Finding, Values, group_of

OM_TYPES = ("counter", "gauge", "histogram", "gaugehistogram", "stateset", "info", "summary", "unknown")
PROM_TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
TEXT_CHARS = 200  # offending text kept per problem
SERIES_KEPT = 64  # label sets kept per sample name, for the profile coverage
MAX_PROBLEMS = 10_000  # a check stops here: past it the input is garbage, and listing more costs without telling
TEXTS_KEPT = 100_000  # line texts kept for problems found at a family's end
_OM_META = re.compile(r"# (HELP|TYPE|UNIT) ([^ ]*) (.*)")
_EOF_LIKE = re.compile(r"[ \t]*#[ \t]*(?i:eof)[ \t\r]*")  # what was meant as '# EOF' (and tells OpenMetrics)
_EOF_BYTES = re.compile(rb"(?mi)^[ \t]*#[ \t]*eof[ \t\r]*$")
_PROM_META = re.compile(r"[ \t]*#[ \t]+(HELP|TYPE)(?:[ \t]+(\S+))?(?:[ \t]+(.*?))?[ \t]*")


@dataclass(frozen=True)
class Problem:
    """One broken rule: where, which, the offending text and what is wrong."""

    line: int | None
    rule: str
    text: str
    message: str

    def as_dict(self) -> dict[str, object]:
        """{"line", "rule", "text", "message"}."""
        return {"line": self.line, "rule": self.rule, "text": self.text, "message": self.message}


@dataclass
class Family:
    """One metric family as written: its type, first line, sample count and the label sets of each name."""

    name: str
    type: str
    line: int
    samples: int = 0
    meta: dict[str, int] = field(default_factory=dict)  # HELP / TYPE / UNIT -> line
    unit: str | None = None
    series: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    ended: bool = False


@dataclass
class Report:
    """What `lint` found."""

    format: str  # "openmetrics" or "prometheus"
    errors: list[Problem]
    warnings: list[Problem]
    families: list[Family]

    @property
    def valid(self) -> bool:
        """True when no rule is broken (warnings aside)."""
        return not self.errors


class Linter:
    """Reads lines in order (`line`), then `finish` gives the report."""

    def __init__(self, openmetrics: bool):
        self.om = openmetrics
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self.families: dict[str, Family] = {}
        self.claimed: dict[str, str] = {}  # sample name -> the family that has it (OpenMetrics name clashes)
        self._clashed: set[str] = set()  # families with a name clash reported
        self.eof: int | None = None
        self.current: Family | None = None
        self._values: Values | None = None
        self._group: tuple[object, ...] | None = None
        self._groups: set[tuple[object, ...]] = set()
        self._group_ts: float | None = None
        self._seen: dict[tuple[object, ...], int] = {}  # series (and timestamp, in OpenMetrics) -> line
        self._late: tuple[int, str] | None = None  # the first line after # EOF
        self._late_count = 0
        self._entry_samples, self._entry_line = 0, 0  # samples of the family since it was (re)entered
        self._text: dict[int, str] = {}  # line -> its text, for problems found at a family's end

    @property
    def full(self) -> bool:
        """True once MAX_PROBLEMS are recorded: the check stops reading."""
        return len(self.errors) + len(self.warnings) >= MAX_PROBLEMS

    def problem(self, line: int | None, rule: str, text: str, message: str, *, warning: bool = False) -> None:
        """Record one problem (past MAX_PROBLEMS, none: the check has stopped)."""
        if not self.full:
            (self.warnings if warning else self.errors).append(Problem(line, rule, text[:TEXT_CHARS], message))

    # -- lines ------------------------------------------------------------------------------------
    def line(self, n: int, text: str) -> None:
        """Check one line (without its newline)."""
        if self.eof is not None:
            self._late = self._late or (n, text)
            self._late_count += 1
            return
        if len(self._text) < TEXTS_KEPT:
            self._text[n] = text[:TEXT_CHARS]
        if self.om and text.endswith("\r"):
            self.problem(n, "syntax", text, "the line ends in CR LF; OpenMetrics lines end in LF alone")
            text = text[:-1]
        if not text.strip(" \t") and not (self.om and text):
            if self.om:
                self.problem(n, "blank-line", text, "OpenMetrics has no blank lines")
            return
        if self.om and _EOF_LIKE.fullmatch(text):
            if text != "# EOF":
                self.problem(n, "eof", text, "OpenMetrics ends with exactly '# EOF'")
            self.eof = n
        elif text.lstrip(" \t").startswith("#"):
            self._comment(n, text)
        else:
            self._sample(n, text)

    def _comment(self, n: int, text: str) -> None:
        m = (_OM_META if self.om else _PROM_META).fullmatch(text)
        if m is None:
            if re.match(r"# (HELP|TYPE|UNIT)\b" if self.om else r"[ \t]*#[ \t]*(HELP|TYPE)\b", text):
                self.problem(n, "metadata", text, "expected '# HELP name text', '# TYPE name type'"
                                                  + (" or '# UNIT name unit'" if self.om else ""))
            elif self.om:
                self.problem(n, "comment", text, "OpenMetrics has no comments but '# HELP', '# TYPE', '# UNIT' "
                                                 "lines (each with a metric name and a text) and '# EOF'")
            return
        kind, name, rest = m.group(1), m.group(2) or "", m.group(3) or ""
        if not NAME.fullmatch(name):
            self.problem(n, "metadata", text, f"{name!r} is not a metric name")
            return
        family = self._enter(n, name, text, declared=True)
        if self._entry_samples:
            self.problem(n, "metadata-order", text, f"# {kind} of {name!r} after its samples (from line "
                                                    f"{self._entry_line}); metadata comes first")
        if kind in family.meta:
            self.problem(n, "metadata-duplicate", text, f"a second # {kind} for {name!r} (first at line "
                                                        f"{family.meta[kind]})")
            return
        family.meta[kind] = n
        if kind == "TYPE":
            types = OM_TYPES if self.om else PROM_TYPES
            if rest not in types:
                self.problem(n, "type", text, f"unknown type {rest!r}; one of: {', '.join(types)}")
            else:
                family.type = rest
                self._values = Values(name, rest, self.om)
        elif kind == "UNIT":
            family.unit = rest
            if not re.fullmatch(r"[a-zA-Z0-9_:]*", rest):
                self.problem(n, "unit", text, f"unit {rest!r} is not made of metric name characters")
            elif rest and not name.endswith("_" + rest):
                self.problem(n, "unit", text, f"the name {name!r} does not end in '_{rest}', its unit")
        if family.unit and family.type in ("info", "stateset") and "TYPE" in family.meta and "UNIT" in family.meta:
            self.problem(n, "unit", text, f"a {family.type} has no unit")

    # -- families -----------------------------------------------------------------------------------
    def _enter(self, n: int, name: str, text: str, *, declared: bool) -> Family:
        """The family a line belongs to, ending the current one when it is another."""
        if self.current is not None and self.current.name == name:
            return self.current
        self._end()
        family = self.families.get(name)
        if family is not None:
            self.problem(n, "family-interleaved", text, f"family {name!r} again, after its lines from line "
                                                        f"{family.line}; a family's lines are one group")
            family.ended, family.meta = False, {}
        else:
            family = self.families[name] = Family(name, "unknown" if self.om else "untyped", n)
            if self.om and name in self.claimed and self.claimed[name] != name:
                owner = self.families[self.claimed[name]]
                self.problem(n, "name-clash", text, f"{name!r} is a sample name of {owner.type} {owner.name!r} "
                                                    f"(line {owner.line})")
                self._clashed.add(name)
        self.current = family
        self._values = Values(name, family.type, self.om)
        self._group, self._groups, self._group_ts = None, set(), None
        self._entry_samples, self._entry_line = 0, n
        return family

    def _end(self) -> None:
        family = self.current
        if family is None:
            return
        if self._values is not None:
            self._report(self._values.finish())
        if self.om:
            for name in {family.name, *(family.name + s for s in OM_SUFFIXES.get(family.type, ("",)))}:
                owner = self.claimed.setdefault(name, family.name)
                if owner != family.name and family.name not in self._clashed:
                    self._clashed.add(family.name)
                    other = self.families[owner]
                    self.problem(family.line, "name-clash", self._text.get(family.line, ""),
                                 f"{family.type} {family.name!r} has samples named {name!r}, as {other.type} "
                                 f"{owner!r} (line {other.line}) has")
        family.ended, self.current = True, None
        self._text.clear()  # what its problems quote is reported: later lines are another family's

    def _report(self, findings: list[Finding]) -> None:
        for line, rule, message, warning in findings:
            self.problem(line, rule, self._text.get(line, ""), message, warning=warning)

    def _names(self, family: Family) -> tuple[str, ...]:
        table = OM_SUFFIXES if self.om else PROM_SUFFIXES
        return tuple(family.name + s for s in table.get(family.type, ("",)))

    def _family_of(self, name: str) -> str:
        """The family a sample name belongs to when it is not the current family's."""
        if self.om:
            return name
        declared = {f.name: f.type for f in self.families.values() if f.type != "untyped"}
        found = family_of(name, declared)
        if found is not None and name in self._names(self.families[found]):
            return found
        return name

    # -- samples --------------------------------------------------------------------------------
    def _sample(self, n: int, text: str) -> None:
        try:
            s = om_sample(text) if self.om else prom_sample(text)
        except Bad as exc:
            self.problem(n, exc.rule, text, str(exc))
            return
        family = self.current
        if family is None or s.name not in self._names(family):
            if family is not None and s.name == family.name:
                family.samples += 1
                names = " or ".join(self._names(family))
                self.problem(n, "suffix", text, f"{s.name!r} is not a sample of {family.type} {family.name!r}: "
                                                f"its samples are named {names}")
                return
            family = self._enter(n, self._family_of(s.name), text, declared=False)
        family.samples += 1
        self._entry_samples += 1
        if self._entry_samples == 1:
            self._entry_line = n
        kept = family.series.setdefault(s.name, [])
        if len(kept) < SERIES_KEPT:
            kept.append(s.labels)
        self._order(n, text, s, family)
        assert self._values is not None
        self._report(self._values.sample(n, s))

    def _order(self, n: int, text: str, s: Sample, family: Family) -> None:
        """Series repeated; in OpenMetrics, label sets interleaved and timestamps mixed or going back."""
        series = (s.name, tuple(sorted(s.labels.items())))
        if not self.om:
            if series in self._seen:
                self.problem(n, "duplicate-series", text, f"the same series as line {self._seen[series]}; each "
                                                          "line has its own name and labels")
            self._seen.setdefault(series, n)
            return
        group = group_of(s, family.name, family.type)
        ts = s.ts
        if self._group is not None and group != self._group and group in self._groups:
            self.problem(n, "group-interleaved", text, "this label set's samples were interrupted by another's; "
                                                       "a metric's samples are together")
        if group == self._group:
            if (ts is None) != (self._group_ts is None):
                self.problem(n, "timestamp-mixed", text, "some samples of this metric have a timestamp and some "
                                                         "do not")
            elif ts is not None and self._group_ts is not None and ts < self._group_ts and family.type != "info":
                self.problem(n, "timestamp-order", text, "the timestamp goes back within this metric")
        key = (*series, s.ts_text)
        if key in self._seen:
            self.problem(n, "duplicate-sample", text, f"the same sample as line {self._seen[key]}", warning=True)
        self._seen.setdefault(key, n)
        self._group, self._group_ts = group, ts
        self._groups.add(group)

    def stop(self, n: int) -> Report:
        """End a check that stopped at line `n` with MAX_PROBLEMS found."""
        self.errors.append(Problem(n, "too-many-problems", "", f"the check stopped at line {n} after "
                                   f"{MAX_PROBLEMS:,} problems; fix these and check again"))
        return self._report_of()

    def finish(self, lines: int, newline: bool) -> Report:
        """End the input: `lines` read, the last ending in a newline or not."""
        self._end()
        if self.om and self.eof is None:
            self.problem(max(lines, 1), "eof", "", "an OpenMetrics exposition ends with a '# EOF' line")
        if self._late:
            (n, text), count = self._late, self._late_count
            self.problem(n, "after-eof", text, f"{count} line(s) after '# EOF' (line {self.eof}), where the "
                                               "exposition ends")
        if not self.om and lines and not newline:
            self.problem(lines, "newline", "", "the last line does not end in a line feed")
        return self._report_of()

    def _report_of(self) -> Report:
        errors = sorted(self.errors, key=lambda p: (p.line or 0))
        return Report("openmetrics" if self.om else "prometheus", errors,
                      sorted(self.warnings, key=lambda p: (p.line or 0)), list(self.families.values()))


def is_openmetrics(data: bytes, content_type: str = "") -> bool:
    """OpenMetrics when served as such, or when a line is '# EOF' (or was meant to be: '#EOF', '# EOF ')."""
    if content_type.split(";")[0].strip().lower() == "application/openmetrics-text":
        return True
    return _EOF_BYTES.search(data) is not None


def lint(data: bytes, *, openmetrics: bool | None = None, content_type: str = "") -> Report:
    """Check one exposition; `openmetrics` None: told from the input (see `is_openmetrics`)."""
    om = is_openmetrics(data, content_type) if openmetrics is None else openmetrics
    linter = Linter(om)
    n = 0
    for n, chunk in enumerate(io.BytesIO(data), 1):  # line by line: never a list of every line at once
        chunk = chunk.removesuffix(b"\n")
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            linter.problem(n, "utf8", chunk.decode("utf-8", "replace"), f"not UTF-8 (byte {exc.start + 1})")
            continue
        linter.line(n, text)
        if linter.full:
            return linter.stop(n)
    return linter.finish(n, data.endswith(b"\n") or not data)
