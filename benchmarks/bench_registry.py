"""Registry commands against the registry's size: a fleet of N identical pools, each being onboarded.

For each size it times, in one process and on the same file:
  yaml.load   a plain `yaml.load` of the file with PyYAML's C loader;
  baseline    the same with the cyclic garbage collector paused, as the registry loader pauses it (the floor:
              libyaml parsing and building Python objects, with no positions, no checks and no messages);
  validate    `hetpool registry validate FILE` (parse with positions, every check, the evidence files), also as a
              ratio to the plain yaml.load (target: within 1.5x of it);
  load        `hetpool registry load FILE` into a fresh DuckDB file (validate, make the schema, store the
              snapshot), and into a store in use (its schema made, another registry loaded before);
  tracker     `hetpool onboarding` on that store (read the snapshot back, read every pool's facts, judge and
              print every pool's checklist);
and prints each in milliseconds, per 10,000 pools, and as a ratio to the baseline.

Run: .venv/bin/python -m benchmarks.bench_registry [--pools 10000,100000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import yaml

from benchmarks.common import report
from pool_registry.yamlread import no_gc_pauses

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POOL = """  - id: p{i}
    chip: h100-sxm
    devices: 8
    devices_per_node: 8
    hourly_cost_per_device: 3.2
    exporter: dcgm
    assign: {{node_pattern: "p{i}-*"}}
    stack: {{driver: "550.144.03", vllm: "0.15.1"}}
    serving: {{model: llama-3.1-70b, engine: vllm, replicas: 2, devices_per_replica: 4, max_concurrency: 64}}
    cost_model: {{mfu: 0.45, mem_bw_eff: 0.75}}
    onboarding: {{stage: exporter, started: 2026-11-24, checks: {{devices: {{by: lee, at: 2026-11-24}}}}}}
"""


def fleet_text(n: int) -> str:
    """The example fleet's chips and models with n pools, every one of them being onboarded."""
    with open(os.path.join(REPO, "examples", "fleet.yaml"), encoding="utf-8") as f:
        head = f.read().split("pools:")[0]
    return head + "pools:\n" + "".join(POOL.format(i=i) for i in range(n))


def seconds(fn: Callable[[], object]) -> float:
    """Wall time of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def hetpool(*argv: str) -> None:
    """One CLI command in this process, its output discarded; a non-zero exit is an error."""
    from app.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    if code != 0:
        raise SystemExit(f"hetpool {' '.join(argv)} exited {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", default="10000,100000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        example, scratch = os.path.join(REPO, "examples", "fleet.yaml"), os.path.join(tmp, "warm.duckdb")
        for argv in (("registry", "validate", example), ("--db", scratch, "registry", "load", example),
                     ("--db", scratch, "onboarding")):
            hetpool(*argv)  # imports and the first store's setup, out of the timings
        for n in (int(x) for x in args.pools.split(",")):
            path, db = os.path.join(tmp, f"fleet-{n}.yaml"), os.path.join(tmp, f"fleet-{n}.duckdb")
            with open(path, "w", encoding="utf-8") as f:
                f.write(fleet_text(n))

            def baseline(path: str = path) -> None:
                with open(path, encoding="utf-8") as f:
                    yaml.load(f.read(), Loader=yaml.CSafeLoader)

            plain = seconds(baseline)
            report(f"yaml.load (C loader), {n:,} pools", plain * 1000, "ms")
            with no_gc_pauses():
                base = seconds(baseline)
            report("baseline: the same, collector paused", base * 1000, "ms", plain * 1000, "of the plain load")
            working = os.path.join(tmp, f"working-{n}.duckdb")
            shutil.copyfile(scratch, working)  # a store in use: its schema made, the example fleet loaded
            for name, argv in (("registry validate", ("registry", "validate", path)),
                               ("registry load, a new store", ("--db", db, "registry", "load", path)),
                               ("registry load, a store in use", ("--db", working, "registry", "load", path)),
                               ("onboarding (tracker)", ("--db", db, "onboarding"))):
                took = seconds(lambda argv=argv: hetpool(*argv))  # type: ignore[misc]
                report(f"{name}, {n:,} pools", took * 1000, "ms", base * 1000, "of the baseline")
                if name == "registry validate":
                    report("  against yaml.load (target 1.5x)", took * 1000, "ms", plain * 1000, "of yaml.load")
                report("  per 10,000 pools", took * 1000 * 10_000 / n, "ms")


if __name__ == "__main__":
    main()
