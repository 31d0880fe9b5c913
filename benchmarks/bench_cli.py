"""CLI start-up: wall time of `hetpool --help` and of every command's and group's --help, against bare
`python -c pass` (the baseline, measured in the same run) and against building every command's parser (what
--help cost when app/commands imported all its modules). The target is under 0.3 s for each --help.

Run: .venv/bin/python -m benchmarks.bench_cli [--repeat 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HETPOOL = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
BASELINE = "python -c pass (baseline)"
TARGET_S = 0.3


def cases() -> dict[str, list[str]]:
    """The baseline, every `hetpool ... --help`, and the parser of every command built at once."""
    from app.cli import build_parser  # here: this process needs every module to list the paths, the runs do not
    from app.commands import help_paths

    helps = {" ".join(("hetpool", *path, "--help")): [*HETPOOL, *path, "--help"] for path in help_paths(build_parser())}
    return {BASELINE: [sys.executable, "-c", "pass"], **helps,
            "every command's parser built": [sys.executable, "-c", "from app.cli import build_parser; build_parser()"]}


def once(cmd: list[str]) -> float:
    """Wall seconds of one run of cmd, which must exit 0."""
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9, help="runs of each case, interleaved (default 9)")
    args = parser.parse_args()
    todo = cases()
    for cmd in todo.values():  # warm the file cache and the bytecode
        once(cmd)
    times: dict[str, list[float]] = {name: [] for name in todo}
    for _ in range(args.repeat):  # interleaved, so a burst of load elsewhere falls on every case alike
        for name, cmd in todo.items():
            times[name].append(once(cmd))
    print(f"load average {os.getloadavg()[0]:.2f}; median of {args.repeat} runs (best in brackets)")
    base_ms = statistics.median(times[BASELINE]) * 1000
    for name, runs in times.items():
        report(f"{name} [{min(runs) * 1000:,.0f} ms]", statistics.median(runs) * 1000, "ms", base_ms, "python -c pass")
    slow = [n for n, runs in times.items() if n.endswith("--help") and statistics.median(runs) >= TARGET_S]
    print(f"--help at or over {TARGET_S:g} s: {', '.join(slow) if slow else 'none'}")


if __name__ == "__main__":
    main()
