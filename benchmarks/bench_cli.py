"""CLI start-up: wall time of `hetpool --help` and of some commands' --help, against bare `python -c pass`
(the baseline, measured in the same run) and against building every command's parser (what --help cost when
app/commands imported all its modules).

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
CASES: dict[str, list[str]] = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "hetpool --help": [*HETPOOL, "--help"],
    "hetpool init --help": [*HETPOOL, "init", "--help"],
    "hetpool registry validate --help": [*HETPOOL, "registry", "validate", "--help"],
    "hetpool alerts --help": [*HETPOOL, "alerts", "--help"],
    "hetpool replay run --help": [*HETPOOL, "replay", "run", "--help"],
    "every command's parser built": [sys.executable, "-c", "from app.cli import build_parser; build_parser()"],
}


def once(cmd: list[str]) -> float:
    """Wall seconds of one run of cmd, which must exit 0."""
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9, help="runs of each case, interleaved (default 9)")
    args = parser.parse_args()
    once(CASES["hetpool --help"])  # warm the file cache and the bytecode
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):  # interleaved, so a burst of load elsewhere falls on every case alike
        for name, cmd in CASES.items():
            times[name].append(once(cmd))
    print(f"load average {os.getloadavg()[0]:.2f}; median of {args.repeat} runs (best in brackets)")
    base_ms = statistics.median(times["python -c pass (baseline)"]) * 1000
    for name, runs in times.items():
        report(f"{name} [{min(runs) * 1000:,.0f} ms]", statistics.median(runs) * 1000, "ms", base_ms, "python -c pass")


if __name__ == "__main__":
    main()
