"""Fleet registry: YAML in, frozen dataclasses out. Depends on nothing in hetpool but canonical/."""

from pool_registry.loader import RegistryError, load_registry, load_registry_text
from pool_registry.model import (
    DTYPES,
    KV_CACHE_DTYPES,
    ONBOARDING_STAGES,
    SCHEDULES,
    Assignment,
    Chip,
    CostModel,
    EngineShape,
    Interconnect,
    Model,
    Onboarding,
    Pool,
    Registry,
    Serving,
    Thermal,
    UnknownIdError,
)
from pool_registry.serialize import registry_from_json, registry_to_dict, registry_to_json
from pool_registry.versions import SpecifierError, parse_specifier, satisfies, version_key
from pool_registry.yamlread import ConfigError, Problem, Reader

__all__ = [
    "DTYPES",
    "KV_CACHE_DTYPES",
    "ONBOARDING_STAGES",
    "SCHEDULES",
    "Assignment",
    "Chip",
    "ConfigError",
    "CostModel",
    "EngineShape",
    "Interconnect",
    "Model",
    "Onboarding",
    "Pool",
    "Problem",
    "Reader",
    "Registry",
    "RegistryError",
    "Serving",
    "SpecifierError",
    "Thermal",
    "UnknownIdError",
    "load_registry",
    "load_registry_text",
    "parse_specifier",
    "registry_from_json",
    "registry_to_dict",
    "registry_to_json",
    "satisfies",
    "version_key",
]
