"""The contract has one home: no layer declares a canonical schema or time unit again."""

from __future__ import annotations

import ast
import re

import pytest

import canonical.metrics
import canonical.prometheus
import canonical.schemas
import canonical.timeunits
from canonical.metrics import METRICS
from canonical.prometheus import family_of
from tests.architecture import LAYERS as ARCHITECTURE
from tests.conftest import REPO

# Every layer of docs/architecture.md but the contract's own, and the benchmarks beside them.
LAYERS = (*sorted(set(ARCHITECTURE) - {"canonical"}), "benchmarks")
NAMES = {n for m in (canonical.metrics, canonical.prometheus, canonical.schemas, canonical.timeunits)
         for n in vars(m) if n.isupper() and not n.startswith("_")}
VALUES = {3_600_000, 86_400_000, 604_800_000}  # an hour, a day, a week in ms: only canonical.timeunits says them
SCHEMA_KEYS = [set(s) for s in (canonical.schemas.REJECT_SCHEMA, canonical.schemas.VERSION_SCHEMA,
                                canonical.schemas.STATE_SCHEMA, canonical.schemas.SAMPLE_SCHEMA)]


def declarations(tree: ast.Module) -> list[tuple[int, str]]:
    """What a module says again that the contract already says: names, time values, schema-shaped dicts."""
    found = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name) and t.id in NAMES:
                found.append((node.lineno, f"declares {t.id}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in VALUES and type(node.value) is int:
            found.append((node.lineno, f"writes the time unit {node.value} out"))
        if isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Constant) for k in node.keys) \
                and all(_dtype(v) for v in node.values):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if keys in SCHEMA_KEYS:
                found.append((node.lineno, f"declares a schema with columns {sorted(keys)}"))
    return found


def test_no_layer_declares_the_contract_again() -> None:
    problems = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            for line, what in declarations(ast.parse(path.read_text(), filename=str(path))):
                problems.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert problems == []


def metric_literals(tree: ast.Module) -> list[tuple[int, str]]:
    """Strings (docstrings aside) that name a canonical metric, where the constants of canonical/metrics.py should."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            named = [m for m in METRICS if re.search(rf"(?<![\w.]){re.escape(m)}(?![\w.])", node.value)]
            if named:
                found.append((node.lineno, f"writes the metric name {named[0]!r} as a string"))
    return found


def test_canonical_metric_names_are_written_only_as_the_catalogs_constants() -> None:
    problems = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            for line, what in metric_literals(ast.parse(path.read_text(), filename=str(path))):
                problems.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert problems == []


@pytest.mark.parametrize(("code", "caught"), [
    ('m = "accelerator.power"\n', True),
    ("q = \"SELECT * FROM samples WHERE metric = 'serving.tokens.prompt'\"\n", True),
    ('"""Reads accelerator.power, the chips\' draw."""\n', False),
    ("q = \"metric LIKE 'accelerator.%'\"\n", False),
    ('m = "accelerator.power.limit"\n', False),
])
def test_the_metric_name_check(code: str, caught: bool) -> None:
    assert bool(metric_literals(ast.parse(code))) is caught


def _dtype(node: ast.expr) -> bool:
    """pl.Int64 or pl.Int64(): a column type, so the dict is a schema (not a row of values)."""
    if isinstance(node, ast.Call):
        node = node.func
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pl"


@pytest.mark.parametrize("code", [
    "HOUR_MS = 3_600_000\n",
    "x = t % 86_400_000\n",
    'REJECTS = {"line": pl.Int64, "record": pl.String(), "reason": pl.String}\n',
    "KEY: tuple[str, ...] = ('ts',)\n",
])
def test_the_check_would_catch_a_second_declaration(code: str) -> None:
    assert declarations(ast.parse(code))


def test_the_canonical_package_imports_nothing_of_the_project() -> None:
    for path in (REPO / "canonical").rglob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not imported & set(LAYERS), path


def test_catalog_units_and_kinds_are_from_the_design() -> None:
    assert METRICS["accelerator.memory.used"].unit == "bytes" and METRICS["accelerator.energy"].kind == "counter"
    assert METRICS["serving.time_to_first_token"].kind == "histogram"
    assert [m for m in METRICS.values() if m.per_device] == [m for n, m in METRICS.items() if
                                                             n.startswith("accelerator.")]


@pytest.mark.parametrize(("name", "family"), [
    ("vllm:e2e_request_latency_seconds_bucket", "vllm:e2e_request_latency_seconds"),
    ("vllm:prompt_tokens_total", "vllm:prompt_tokens"), ("tgi_queue_size", "tgi_queue_size"),
    ("vllm:prompt_tokens_created", "vllm:prompt_tokens"), ("other_total", None),
])
def test_sample_names_find_their_family(name: str, family: str | None) -> None:
    assert family_of(name, {"vllm:e2e_request_latency_seconds", "vllm:prompt_tokens", "tgi_queue_size"}) == family
