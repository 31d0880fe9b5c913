"""Every `hetpool` example of the README and of the docs pages it sends a reader to (the CLI reference, the
console, the replay's model, alerting, development) runs as written on the demo database
(HETPOOL_DB=demo/hetpool.duckdb, as the README sets it), from a folder holding the repository's examples; those that
need a service of their own or run until stopped are checked for their --help only, each with the reason."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.cli import run
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # about thirty commands, replays and a calibration among them

README = REPO / "README.md"
# the pages the README's reference moved to, whose examples were the README's
PAGES = (README, *(REPO / "docs" / f"{name}.md" for name in ("cli", "console", "replay", "alerting", "development")))
_ASSIGNMENT = re.compile(r"^[A-Z_]+=\S*$")
_COMMAND = re.compile(r"^(?:[A-Z_]+=\S*\s+)*hetpool\s")

# Examples that cannot run here as written, by their opening words: why, and so only their --help is checked.
HELP_ONLY = {
    "hetpool check http": "fetches from a live exporter on gpu-node-1",
    "hetpool ingest scrape": "scrapes a live exporter on gpu-node-1",
    "hetpool ingest prometheus": "pulls from a Prometheus of your own",
    "hetpool console": "serves the console until stopped (tests/test_console_command.py runs it)",
    "hetpool serve ": "runs its collectors until stopped (tests/test_serve.py runs it)",
    "hetpool serve-feed": "serves the feed until stopped (tests/test_feed.py serves it)",
    "hetpool --db demo.duckdb demo": "builds a larger demo than the suite's (the demo_db fixture builds one through "
                                     "`hetpool demo`)",
    "hetpool replay sweep --candidate examples/candidates/sla_cost.yaml --grid examples/grid.yaml --executor ray":
        "starts a Ray cluster (tests/test_sweep_ray.py starts one)",
}
# What an example exits with on the demo, when not 0: the demo plants what these commands report.
EXIT = {
    "hetpool versions": 1,  # the demo's drifted nodes and the metric an exporter upgrade dropped
    "hetpool alerts": 1,  # the demo's incidents make something critical
    "hetpool replay runway": 1,  # at 5 %/week, a pool of the small demo breaks its SLA within the 12 weeks
}
# Examples that do not run as written today, with what stops them; strict, so a fix is noticed.
BROKEN: dict[str, str] = {}


def examples(text: str) -> list[str]:
    """Every `hetpool ...` command line of the README: indented example lines and lines of fenced blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if (fenced or line.startswith("    ")) and _COMMAND.match(line.strip()):
            words = shlex.split(line, comments=True)
            while words and _ASSIGNMENT.match(words[0]):  # HETPOOL_FEED_TOKEN=... hetpool serve-feed
                words.pop(0)
            if ">" in words:  # `hetpool plan ... --json > plan.json`: what it prints is read here instead
                words = words[:words.index(">")]
            if words[:1] == ["hetpool"]:
                found.append(shlex.join(words))
    return list(dict.fromkeys(found))  # the introduction's `ingest file` comes again in the reference


def why_help_only(example: str) -> str | None:
    return next((why for start, why in HELP_ONLY.items() if example.startswith(start)), None)


def expected_exit(example: str) -> int:
    return next((code for start, code in EXIT.items() if example.startswith(start)), 0)


EXAMPLES = examples("\n".join(page.read_text(encoding="utf-8") for page in PAGES))


def test_the_readme_has_its_examples_and_every_exception_names_one() -> None:
    assert len(EXAMPLES) >= 24
    for start in [*HELP_ONLY, *EXIT, *BROKEN]:
        assert any(e.startswith(start) for e in EXAMPLES), f"no example starts with {start!r} any more"


def test_the_readme_has_its_own_examples_to_try() -> None:
    own = examples(README.read_text(encoding="utf-8"))
    assert len(own) >= 6 and "hetpool registry load demo/hetpool.fleet.yaml" in own


def test_the_extraction_reads_both_kinds_of_example() -> None:
    text = ("Text.\n\n    hetpool init  # a comment\n\n```sh\nexport X=1\nhetpool registry show --json\n```\n"
            "    HETPOOL_FEED_TOKEN=... hetpool serve-feed --port 9464\n    promtool check rules x.yaml\n"
            "    hetpool plan --json > plan.json\n    hetpool init\n    it's prose, indented\n")
    assert examples(text) == ["hetpool init", "hetpool registry show --json", "hetpool serve-feed --port 9464",
                              "hetpool plan --json"]


@pytest.fixture
def workdir(tmp_path: Path, demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder as the README's reader has it after `make demo`: examples/, normalizers/profiles/, demo/."""
    for name in ("examples", "normalizers"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / "demo").mkdir()
    shutil.copy(demo_db, tmp_path / "demo" / "hetpool.duckdb")
    shutil.copy(demo_db.with_name(f"{demo_db.stem}.fleet.yaml"), tmp_path / "demo" / "hetpool.fleet.yaml")
    evidence = demo_db.with_name(f"{demo_db.stem}.evidence")  # the fleet file's evidence, named relative to it
    shutil.copytree(evidence, tmp_path / "demo" / evidence.name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HETPOOL_DB", "demo/hetpool.duckdb")
    return tmp_path


def command_of(argv: list[str]) -> list[str]:
    """The command path of an argv, without global options and arguments: ['replay', 'sweep'], ['check']."""
    words, rest = [], list(argv)
    while rest:
        word = rest.pop(0)
        if word == "--db":
            rest.pop(0)
        elif not word.startswith("-"):
            words.append(word)
    return words[:2] if words[:1] in (["replay"], ["ingest"]) else words[:1]


def runnable() -> list[pytest.ParameterSet]:
    return [pytest.param(e, id=e, marks=[pytest.mark.xfail(strict=True, reason=BROKEN[e])] if e in BROKEN else [])
            for e in EXAMPLES if not why_help_only(e)]


@pytest.mark.parametrize("example", runnable())
def test_the_readme_example_runs(example: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *shlex.split(example)[1:])
    assert code == expected_exit(example), f"{example}\nexit {code}\n{err[-2000:]}"
    assert "Traceback" not in err


@pytest.mark.parametrize("example", [e for e in EXAMPLES if why_help_only(e)], ids=str)
def test_the_readme_example_that_cannot_run_here_has_its_help(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    command = command_of(shlex.split(example)[1:])
    code, out, err = run(capsys, *command, "--help")
    assert code == 0 and f"hetpool {' '.join(command)}" in out, f"{example}: {why_help_only(example)}\n{err}"


def test_the_command_path_leaves_out_options_and_arguments() -> None:
    assert command_of(["--db", "demo.duckdb", "demo", "--days", "2"]) == ["demo"]
    assert command_of(["replay", "sweep", "--grid", "g.yaml"]) == ["replay", "sweep", "g.yaml"][:2]
    assert command_of(["check", "http://gpu-node-1:9400/metrics", "--profile", "dcgm"]) == ["check"]
