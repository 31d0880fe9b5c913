"""Registry load time against its size: a fleet of N identical pools, validated as `hetpool registry load` does,
with libyaml's parser (the default) and with the pure-Python one (the baseline, measured in the same run), and
the stored snapshot read back as every other command reads it.

Run: .venv/bin/python -m benchmarks.bench_registry [--pools 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import os
import time
from unittest import mock

from benchmarks.common import report
from pool_registry import load_registry_text, registry_from_json, registry_to_json, yamlread

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
"""


def fleet_text(n: int) -> str:
    """The example fleet's chips and models with n pools."""
    with open(os.path.join(REPO, "examples", "fleet.yaml"), encoding="utf-8") as f:
        head = f.read().split("pools:")[0]
    return head + "pools:\n" + "".join(POOL.format(i=i) for i in range(n))


def seconds(text: str) -> float:
    start = time.perf_counter()
    load_registry_text(text, "fleet.yaml")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pools", default="1000,10000,100000")
    args = parser.parse_args()
    for n in (int(x) for x in args.pools.split(",")):
        text = fleet_text(n)
        fast = seconds(text)
        if n <= 10_000:
            with mock.patch.object(yamlread, "FAST_LOADER", None):
                slow = seconds(text)
            report(f"registry load, {n:,} pools (libyaml)", fast, "s", slow, "of the pure-Python parser")
        else:
            report(f"registry load, {n:,} pools (libyaml)", fast, "s")
        report("  per 10,000 pools", fast * 10_000 / n, "s")
        snapshot = registry_to_json(load_registry_text(text))
        start = time.perf_counter()
        registry_from_json(snapshot)
        report(f"stored snapshot read back, {n:,} pools", time.perf_counter() - start, "s", fast, "of the YAML load")


if __name__ == "__main__":
    main()
