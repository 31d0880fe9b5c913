"""The set of loaded profiles: shipped ones plus any --profiles-dir, lookup by name, detection by metric name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from normalizers.exceptions import ProfileError, UnknownProfileError
from normalizers.profile import Profile
from normalizers.profile.loader import load_profile, load_profile_text
from pool_registry import ConfigError, Problem


@dataclass(frozen=True)
class ProfileSet:
    """Profiles by name; a later directory's profile replaces a shipped one of the same name."""

    profiles: dict[str, Profile]
    replaced: tuple[str, ...] = ()
    _prefixes: list[tuple[str, str]] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        pairs = [(prefix, p.name) for p in self.profiles.values() for prefix in p.detect]
        self._prefixes.extend(sorted(pairs, key=lambda pair: -len(pair[0])))

    def get(self, name: str) -> Profile:
        """The profile with this name, or an error listing the known ones."""
        if name not in self.profiles:
            raise UnknownProfileError(f"unknown profile '{name}'; known: {', '.join(sorted(self.profiles))}")
        return self.profiles[name]

    def detect(self, metric_name: str) -> Profile | None:
        """The profile whose mapping names this metric, else one whose `ignore` names it, else the one with the
        longest matching prefix; an ignored prefix claims nothing, so it cannot swallow another dialect's names."""
        for profile in self.profiles.values():
            if metric_name in profile.metrics or metric_name in profile.errors:
                return profile
        for profile in self.profiles.values():
            if profile.ignores(metric_name, prefixes=False):
                return profile
        for prefix, name in self._prefixes:
            if metric_name.startswith(prefix):
                return self.profiles[name]
        return None


def builtin_profiles() -> list[Profile]:
    """The profiles shipped in normalizers/profiles/."""
    out = []
    for entry in sorted(resources.files("normalizers.profiles").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            out.append(load_profile_text(entry.read_text(encoding="utf-8"), f"normalizers/profiles/{entry.name}",
                                         file_name=entry.name[:-5]))
    return out


def profiles_in(directory: str | Path) -> list[Profile]:
    """Every *.yaml profile in a directory, all problems reported at once."""
    d = Path(directory)
    if not d.is_dir():
        raise ProfileError([Problem(str(d), None, "", "not a directory of profile YAML files")])
    problems: list[Problem] = []
    out = []
    for path in sorted(d.glob("*.yaml")):
        try:
            out.append(load_profile(path))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ProfileError(problems)
    return out


def check_profiles(path: str | Path) -> tuple[list[tuple[Path, Profile]], list[Problem]]:
    """One profile file, or every *.yaml in a directory: the valid profiles and every problem of the others."""
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.yaml"))
        if not files:
            return [], [Problem(str(p), None, "", "no *.yaml profile files in this directory")]
    else:
        files = [p]
    valid: list[tuple[Path, Profile]] = []
    problems: list[Problem] = []
    for file in files:
        try:
            valid.append((file, load_profile(file)))
        except ConfigError as exc:
            problems.extend(exc.problems)
    return valid, problems


def load_profiles(extra_dirs: Iterable[str | Path] = ()) -> ProfileSet:
    """Shipped profiles, then each extra directory in order."""
    profiles = {p.name: p for p in builtin_profiles()}
    replaced = []
    for directory in extra_dirs:
        for profile in profiles_in(directory):
            if profile.name in profiles:
                replaced.append(profile.name)
            profiles[profile.name] = profile
    return ProfileSet(profiles, tuple(replaced))
