"""Compile the replay's hot modules with mypyc into .native/, for replay/native.py to put on their packages' paths.

Run: make native   (or: .venv/bin/python scripts/build_native.py [--root DIR] [--strict] [--force])

Up to date when the stamp's digest matches the sources and it was built for this Python. Without mypyc or a C
compiler it says so and exits 0 (the replay then runs as pure Python, slower) unless --strict is given.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from types import ModuleType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _native_module(root: str) -> ModuleType:
    """replay/native.py alone, without importing the replay package (and the build it may load)."""
    spec = importlib.util.spec_from_file_location("_hetpool_native", os.path.join(root, "replay", "native.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def build(root: str, work: str, c: ModuleType) -> dict[str, str]:
    """Compile c.MODULES under `root` into `work`/lib; returns module name -> built file, relative to lib."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    sources = [os.path.relpath(c.source_path(root, m), root) for m in c.MODULES]
    here = os.getcwd()
    os.chdir(root)  # mypyc names the modules after their paths from here
    try:
        # follow-imports=skip: the compiled modules type each other fully; what they import beyond (the plan, the
        # fleet, numpy behind them) is read around the event loop, not in it, so it may stay untyped, and the
        # build takes seconds instead of minutes
        flags = ["--follow-imports=skip", "--ignore-missing-imports", f"--cache-dir={os.path.join(work, 'cache')}"]
        extensions = mypycify([*flags, *sources], opt_level="3", debug_level="0", target_dir=os.path.join(work, "c"),
                              group_name=c.GROUP)
        dist = Distribution({"name": "hetpool-native", "ext_modules": extensions, "script_name": "build_native",
                             "script_args": ["-q", "build_ext", "--build-lib", os.path.join(work, "lib"),
                                             "--build-temp", os.path.join(work, "temp")]})
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(here)
    files = {m: c.module_file(m) for m in (c.GROUP + "__mypyc", *c.MODULES)}
    for name, rel in files.items():
        if not os.path.isfile(os.path.join(work, "lib", rel)):
            raise RuntimeError(f"mypyc built no {rel} for {name}")
    return files


def install(root: str, work: str, files: dict[str, str], digest: str, c: ModuleType) -> str:
    """Move the built files into the build directory, laid out as their packages, with their stamp; an older build
    is replaced whole."""
    out = c.build_dir(root)
    staging = out + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    for rel in files.values():
        os.makedirs(os.path.join(staging, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(os.path.join(work, "lib", rel), os.path.join(staging, rel))
    with open(os.path.join(staging, c.STAMP), "w", encoding="utf-8") as f:
        json.dump({"digest": digest, "files": sorted(files.values()), **c.interpreter()}, f, indent=1)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(staging, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=ROOT, help="the project checkout (default: this one)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the build cannot be made")
    parser.add_argument("--force", action="store_true", help="rebuild even when the build is up to date")
    args = parser.parse_args(argv)
    c = _native_module(args.root)
    if not args.force and c.choose(args.root, {}).compiled:
        print(f"native: the compiled replica in {c.build_dir(args.root)} is up to date")
        return 0
    digest = c.sources_digest(args.root)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="hetpool-native-") as work:
            files = build(args.root, work, c)
            out = install(args.root, work, files, digest, c)
    except (Exception, SystemExit) as e:  # mypyc exits on a type error, setuptools raises on a compile error
        print(f"native: could not compile the replica ({type(e).__name__}: {e}); the replay runs as pure Python, "
              "with the same results, slower", file=sys.stderr)
        return 1 if args.strict else 0
    took = time.perf_counter() - start
    print(f"native: compiled {', '.join(c.MODULES)} with mypyc into {out} in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
