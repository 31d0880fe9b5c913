"""Vendor profiles compiled into Prometheus recording and alerting rules that produce the canonical series."""

from normalizers.promrules.placement import LabelPlacement, Placement, RegistryPlacement, RulesError
from normalizers.promrules.recording import Unsupported
from normalizers.promrules.ruleset import RuleSet, compile_rules

__all__ = ["LabelPlacement", "Placement", "RegistryPlacement", "RuleSet", "RulesError", "Unsupported",
           "compile_rules"]
