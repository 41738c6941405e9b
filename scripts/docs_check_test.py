#!/usr/bin/env python3
"""Self-test of scripts/docs_check.py (ctest docs.check_selftest, and a step
of scripts/test.sh): the check must pass on a copy of the tree and fail on
each deliberately false statement planted into a copy, one at a time: a
path that does not exist, a Rust item not defined where it is named, an item
said to be in a file that does not define it, a command nothing runs, a label
no test has, a header API version without its change-log entry.

Usage: docs_check_test.py [--build-dir DIR] [REPO_ROOT]
Exit 0 when every case behaves, 1 naming each case that did not.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "docs_check.py")
SKIP = {".git", "target", "build", "node_modules", "__pycache__"}

# (name, file, text to append or (old, new) to replace, what the check must say)
PLANTS = [
    ("false path", "docs/testing.md", "\nThe printf state lives in `src/hostcall/printf/`.\n",
     "names a path that does not exist"),
    ("false path relative to src/", "docs/process.md", "\nSee `hostcall/printf/format.rs`.\n",
     "names a path that does not exist"),
    ("false Rust item", "docs/listener.md", "\nEach lane goes through `Services::serve_lane`.\n",
     "does not define"),
    ("false item in a file", "docs/protocols.md", "\nThe gate (`Gate` in `src/hostcall/services/mod.rs`).\n",
     "which does not define it"),
    ("false constant", "docs/listener.md", "\nThe back-off spins `SPIN_ROUNDS` times.\n",
     "occurs nowhere in the code"),
    ("command nothing runs", "README.md", "\n```sh\nscripts/test.sh --quick\n```\n",
     "command neither run by a test nor listed"),
    ("command not run exactly", "docs/testing.md", ("```sh\nbash scripts/test.sh\n```", "```sh\nscripts/test.sh\n```"),
     "command neither run by a test nor listed"),
    ("false label", "docs/testing.md", "\nRun the tests labelled `bench` with `-L bench`.\n",
     "label that no test has"),
    ("false label in the label table", "docs/testing.md",
     ("| `docs` | the docs check", "| `documentation` | the docs check"), "lists a ctest label that no test has"),
    ("false test name", "docs/testing.md", "\n`suite.honesty` checks the suite.\n", "names a ctest that is not registered"),
    ("API version without its entry", "include/amdgpu_dropin_hostcall.h",
     ("#define AMDGPU_DROPIN_HOSTCALL_API_VERSION 5", "#define AMDGPU_DROPIN_HOSTCALL_API_VERSION 6"),
     "the header says 6"),
    ("false path in a header comment", "include/rochostcall.hpp", ("\n#pragma once", "\n// See src/hostcall/nowhere.rs.\n#pragma once"),
     "names a path that does not exist"),
]


def copy_tree(root, dest):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP and not d.startswith("build")]
        rel = os.path.relpath(dirpath, root)
        os.makedirs(os.path.join(dest, rel), exist_ok=True)
        for name in filenames:
            shutil.copy2(os.path.join(dirpath, name), os.path.join(dest, rel, name))


def run_check(root, build_dir):
    command = [sys.executable, CHECK, root] + (["--build-dir", build_dir] if build_dir else [])
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


def main(argv):
    parser = argparse.ArgumentParser(description="Self-test of scripts/docs_check.py.")
    parser.add_argument("root", nargs="?", default=os.path.join(HERE, ".."))
    parser.add_argument("--build-dir", help="passed on to docs_check.py")
    args = parser.parse_args(argv)
    failures = []
    with tempfile.TemporaryDirectory(prefix="docs_check_test.") as scratch:
        clean = os.path.join(scratch, "clean")
        copy_tree(os.path.abspath(args.root), clean)
        code, output = run_check(clean, args.build_dir)
        if code != 0:
            # Every planted case below is judged against a clean copy.
            print(f"FAIL the unchanged tree: exit {code}\n{output}")
            return 1
        print("ok   the unchanged tree passes")
        for name, rel, change, expected in PLANTS:
            planted = os.path.join(scratch, "planted")
            shutil.rmtree(planted, ignore_errors=True)
            shutil.copytree(clean, planted)
            path = os.path.join(planted, rel)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if isinstance(change, tuple):
                if change[0] not in text:
                    failures.append(f"{name}: {rel} no longer holds {change[0]!r}; update the plant")
                    continue
                text = text.replace(change[0], change[1], 1)
            else:
                text += change
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            code, output = run_check(planted, args.build_dir)
            if code != 1 or expected not in output:
                failures.append(f"{name}: want exit 1 saying {expected!r}; got exit {code}:\n{output}")
            else:
                print(f"ok   {name}")
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"docs_check_test: {len(PLANTS) + 1 - len(failures)} of {len(PLANTS) + 1} cases behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
