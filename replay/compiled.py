"""The replica's hot modules as compiled by mypyc, used only when the build is of exactly the current sources.

`make native` (scripts/build_native.py) compiles `modules()` with mypyc into `.native/<python tag>/`, outside the
source tree, with a stamp holding the SHA-256 of the sources it compiled. When `replay` is imported, this module
serves the compiled modules through an import finder if the stamp matches the sources on disk; a missing, stale
or unloadable build means the pure Python runs, with the same results (tests/test_compiled.py), only slower.
HETPOOL_COMPILED=0 forces the pure Python. The modules stay plain, typed Python: mypyc compiles them as written.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

GROUP = "hetpool_native"  # mypyc's shared library for the group is the module GROUP + "__mypyc"
SWITCH = "HETPOOL_COMPILED"
STAMP = "stamp.json"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = ("replay.book", "replay.passes", "replay.replica")


def modules(root: str = ROOT) -> tuple[str, ...]:
    """What is compiled: the replica's modules, every routing policy module and the simulator.

    The policies are found in their folder, so a new one makes the build stale (and runs as pure Python) until
    `make native` compiles it too: a policy written in Python could not subclass the compiled base classes.
    """
    folder = os.path.join(root, "replay", "policies")
    found = sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py")
    return (*CORE, *(f"replay.policies.{name}" for name in found), "replay.simulator")


MODULES = modules()


@dataclass(frozen=True)
class Choice:
    """Whether the compiled build is used, why, and the extension files to load when it is."""

    compiled: bool
    reason: str
    files: tuple[tuple[str, str], ...] = ()  # (module name, path), the group's library first


def build_dir(root: str = ROOT) -> str:
    """Where the build for this interpreter lives."""
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")  # e.g. .cpython-311-x86_64-linux-gnu.so
    return os.path.join(root, ".native", suffix.strip(".").removesuffix(".so") or "python")


def source_path(root: str, module: str) -> str:
    """The source file of a module under root."""
    return os.path.join(root, *module.split(".")) + ".py"


def sources_digest(root: str = ROOT) -> str:
    """SHA-256 over the compiled modules' names and source bytes: what a build must have been made from."""
    h = hashlib.sha256()
    for module in modules(root):
        with open(source_path(root, module), "rb") as f:
            h.update(module.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def choose(root: str = ROOT, environ: Mapping[str, str] = os.environ) -> Choice:
    """Decide, without importing anything, whether the build in `root` may replace the pure Python."""
    if environ.get(SWITCH, "") == "0":
        return Choice(False, f"pure Python ({SWITCH}=0)")
    where = build_dir(root)
    try:
        with open(os.path.join(where, STAMP), encoding="utf-8") as f:
            stamp = json.load(f)
        built = {str(k): str(v) for k, v in stamp["files"].items()}
        digest = str(stamp["digest"])
    except FileNotFoundError:
        return Choice(False, "pure Python (no compiled build: run `make native`)")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return Choice(False, f"pure Python (unreadable build stamp {os.path.join(where, STAMP)}: {e})")
    try:
        current = sources_digest(root)
        names = (GROUP + "__mypyc", *modules(root))
    except OSError as e:
        return Choice(False, f"pure Python (cannot read the sources: {e})")
    if digest != current:
        return Choice(False, "pure Python (the compiled build is of older sources: run `make native`)")
    if set(built) != set(names):
        return Choice(False, f"pure Python (build stamp lists {sorted(built)}, expected {sorted(names)})")
    return Choice(True, "compiled with mypyc", tuple((n, os.path.join(where, built[n])) for n in names))


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the chosen modules (and the group's library) in the build, ahead of the sources, when imported."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        where = self.files.get(name)
        if where is None:
            return None
        return importlib.util.spec_from_file_location(name, where,
                                                      loader=importlib.machinery.ExtensionFileLoader(name, where))


def install(choice: Choice, modules: dict[str, ModuleType] | None = None, finders: list[object] | None = None) -> str:
    """Serve the chosen build's modules from then on; on any failure leave `modules` and `finders` as they were."""
    if not choice.compiled:
        return choice.reason
    target = sys.modules if modules is None else modules
    meta = sys.meta_path if finders is None else finders
    if any(name in target for name, _ in choice.files):
        return "pure Python (its modules were imported before the compiled build could be loaded)"
    files = dict(choice.files)
    group = GROUP + "__mypyc"
    try:  # the group's library holds all the code: load it now, so that a broken build falls back here
        loader = importlib.machinery.ExtensionFileLoader(group, files[group])
        spec = importlib.util.spec_from_file_location(group, files[group], loader=loader)
        if spec is None:
            raise ImportError(f"no module spec for {files[group]}")
        library = importlib.util.module_from_spec(spec)
        loader.exec_module(library)
    except (ImportError, OSError) as e:
        return f"pure Python (the compiled build did not load: {e})"
    target[group] = library
    meta.insert(0, _Finder(files))
    return choice.reason


# Importing `replay` imports this module first: what runs, and why, is decided once per process.
STATUS = install(choose())
