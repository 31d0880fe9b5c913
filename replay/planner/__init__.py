"""The day-0 planner: TP x PP x EP layouts of a model per pool, their memory, speed and money, ranked.

    plan_model(registry, model_id, pool_ids, PlanSettings(...), candidate) -> PlanReport
    report_dict(report) / report_lines(report): what `hetpool plan` emits; registry_with_plan(...): `--write`
"""

from replay.planner.compat import compatibility
from replay.planner.layouts import RULES, Excluded, Layout, enumerate_layouts
from replay.planner.memory import Engine, Memory, memory, memory_wall
from replay.planner.rank import Plan, Targets
from replay.planner.report import PLAN_KEYS, memory_frame, plans_frame, report_dict, report_lines
from replay.planner.search import DEFAULT_CONCURRENCY, PlanError, PlanReport, PlanSettings, PoolWall, plan_model
from replay.planner.timing import Coefficients, coefficients_of, engine_of, spec_of
from replay.planner.write import rebase_evidence, registry_with_plan, serving_block

__all__ = [
    "DEFAULT_CONCURRENCY", "PLAN_KEYS", "RULES", "Coefficients", "Engine", "Excluded", "Layout", "Memory", "Plan",
    "PlanError", "PlanReport", "PlanSettings", "PoolWall", "Targets", "coefficients_of", "compatibility", "engine_of",
    "enumerate_layouts", "memory", "memory_frame", "memory_wall", "plan_model", "plans_frame", "rebase_evidence",
    "registry_with_plan", "report_dict", "report_lines", "serving_block", "spec_of",
]
