"""Chip onboarding tracker: stages and checklist judged from evidence files, telemetry and replays."""

from onboarding.exceptions import EvidenceError, OnboardingError
from onboarding.facts import Facts, read_facts
from onboarding.tracker import Item, Stage, Track, onboarding_pools, track

__all__ = ["EvidenceError", "Facts", "Item", "OnboardingError", "Stage", "Track", "onboarding_pools", "read_facts",
           "track"]
