"""Collectors as a service: the kinds `hetpool serve` can run, by name, and their runner."""

from __future__ import annotations

from collectors.service.base import Collector, Outcome, Status, StopCheck
from collectors.service.drop_folder import DropFolder
from collectors.service.prometheus_pull import PrometheusPull, PullIncomplete
from collectors.service.runner import Runner
from collectors.service.scrape_target import ScrapeTarget

KINDS: dict[str, type] = {"prometheus": PrometheusPull, "scrape": ScrapeTarget, "folder": DropFolder}

__all__ = ["KINDS", "Collector", "DropFolder", "Outcome", "PrometheusPull", "PullIncomplete", "Runner",
           "ScrapeTarget", "Status", "StopCheck"]
