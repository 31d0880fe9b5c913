"""The replay's hot modules as compiled by mypyc: used only when the build is of exactly these sources and this Python.

`make native` (scripts/build_native.py) compiles MODULES with mypyc into `.native/<extension tag>/`, laid out as
the packages are (`replay/book.<tag>.so`, `replay/replica/events.<tag>.so`, ...), with a stamp holding the
SHA-256 of the sources it compiled, the Python version and the extension suffix. Each package that holds a
compiled module puts the build's folder for it ahead of its own on its `__path__` (`extend`, called at the top
of its `__init__.py`) when the stamp matches the sources on disk and the running interpreter, so the ordinary
import of the package's submodules finds the compiled file first. Nothing global changes: no import finder, no
`sys.path` entry. A missing, stale or foreign build means the pure Python runs, with the same results
(tests/test_native.py), only slower.

The compiled modules are a fixed list: a policy or predictor module added anywhere, in `replay/policies/` or a
module of the user's own, is plain Python that runs beside them (the bases it extends allow it) and leaves the
build valid. HETPOOL_COMPILED=0 forces the pure Python; HETPOOL_COMPILED=1 makes any doubt about the build an
error, for CI, where the build must be there.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
import sysconfig
from collections.abc import Mapping, MutableSequence
from dataclasses import dataclass

GROUP = "replay._native"  # mypyc's shared library for the group is the module GROUP + "__mypyc"
SWITCH = "HETPOOL_COMPILED"
STAMP = "stamp.json"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = (
    "replay.book", "replay.step",
    "replay.replica.cache", "replay.replica.state", "replay.replica.schedule", "replay.replica.events",
    "replay.replica.estimates",
    "replay.policies.base", "replay.policies.round_robin", "replay.policies.least_loaded", "replay.policies.cost_min",
    "replay.policies.sla_cost", "replay.policies.pd_split", "replay.policies.observed",
    "replay.simulator",
)
PACKAGES = tuple(sorted({m.rpartition(".")[0] for m in MODULES}))


class NativeBuildError(RuntimeError):
    """HETPOOL_COMPILED=1 and the compiled build cannot be used."""


@dataclass(frozen=True)
class Choice:
    """Whether the compiled build is used, and why."""

    compiled: bool
    reason: str
    where: str = ""  # the build's folder, when it is used


def ext_suffix() -> str:
    """The extension suffix of this interpreter, e.g. .cpython-311-x86_64-linux-gnu.so."""
    return str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def build_dir(root: str = ROOT) -> str:
    """Where the build for this interpreter lives."""
    return os.path.join(root, ".native", ext_suffix().strip(".").removesuffix(".so") or "python")


def source_path(root: str, module: str) -> str:
    """The source file of a module under root."""
    return os.path.join(root, *module.split(".")) + ".py"


def sources_digest(root: str = ROOT) -> str:
    """SHA-256 over the compiled modules' names and source bytes: what a build must have been made from."""
    h = hashlib.sha256()
    for module in MODULES:
        with open(source_path(root, module), "rb") as f:
            h.update(module.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def interpreter() -> dict[str, str]:
    """What a build must have been made for: the Python version, its implementation and extension suffix."""
    return {"python": platform.python_version(), "implementation": sys.implementation.cache_tag or "",
            "suffix": ext_suffix()}


def choose(root: str = ROOT, environ: Mapping[str, str] = os.environ) -> Choice:
    """Decide, without importing anything, whether the build in `root` may replace the pure Python."""
    if environ.get(SWITCH, "") == "0":
        return Choice(False, f"pure Python ({SWITCH}=0)")
    where = build_dir(root)
    try:
        with open(os.path.join(where, STAMP), encoding="utf-8") as f:
            stamp = json.load(f)
        digest, built_for = str(stamp["digest"]), {k: str(stamp[k]) for k in interpreter()}
        files = [str(f) for f in stamp["files"]]
    except FileNotFoundError:
        return Choice(False, "pure Python (no compiled build: run `make native`)")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return Choice(False, f"pure Python (unreadable build stamp {os.path.join(where, STAMP)}: {e})")
    running = interpreter()
    if built_for != running:
        return Choice(False, f"pure Python (the compiled build is for Python {built_for['python']} "
                             f"{built_for['implementation']}, this is {running['python']} {running['implementation']}: "
                             "run `make native`)")
    try:
        current = sources_digest(root)
    except OSError as e:
        return Choice(False, f"pure Python (cannot read the sources: {e})")
    if digest != current:
        return Choice(False, "pure Python (the compiled build is of older sources: run `make native`)")
    expected = sorted(module_file(m) for m in (GROUP + "__mypyc", *MODULES))
    if sorted(files) != expected or not all(os.path.isfile(os.path.join(where, f)) for f in files):
        return Choice(False, f"pure Python (the build in {where} lacks some of its files: run `make native`)")
    return Choice(True, "compiled with mypyc", where)


def module_file(module: str) -> str:
    """The path of a module's extension file inside a build folder."""
    return os.path.join(*module.split(".")) + ext_suffix()


def required(choice: Choice, environ: Mapping[str, str] = os.environ) -> Choice:
    """The choice, unless HETPOOL_COMPILED=1 asks for the build and it cannot be used: then an error."""
    if not choice.compiled and environ.get(SWITCH, "") == "1":
        raise NativeBuildError(f"{SWITCH}=1 asks for the compiled replay, but: {choice.reason}")
    return choice


@functools.cache
def chosen() -> Choice:
    """This process's choice, made once, on first use."""
    return required(choose())


def extend(path: MutableSequence[str], package: str) -> None:
    """Put the build's folder for `package` first on its `__path__`, when the build is chosen."""
    if package not in PACKAGES:
        raise ValueError(f"{package} holds no compiled module; packages: {', '.join(PACKAGES)}")
    choice = chosen()
    if choice.compiled:
        folder = os.path.join(choice.where, *package.split("."))
        if folder not in path:
            path.insert(0, folder)


def status() -> str:
    """What runs, and why: the choice's reason, checked against where the replica's modules were loaded from."""
    choice = chosen()
    loaded = [sys.modules[m] for m in MODULES if m in sys.modules]
    if choice.compiled and any(not str(getattr(m, "__file__", "")).endswith(ext_suffix()) for m in loaded):
        return "pure Python (some of its modules were loaded before the compiled build was chosen)"
    return choice.reason
