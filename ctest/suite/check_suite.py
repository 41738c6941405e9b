#!/usr/bin/env python3
"""Usage: check_suite.py CTEST BUILD_DIR

The suite itself is honest: no test passes or fails on its printed output
(PASS_REGULAR_EXPRESSION / FAIL_REGULAR_EXPRESSION would hide a crash after
"OK"), every test that can skip declares SKIP_RETURN_CODE 77, and tests
labelled gpu can skip (a machine without a GPU reports them skipped, never
passed or failed)."""
import json
import subprocess
import sys

ctest, build_dir = sys.argv[1], sys.argv[2]
listing = subprocess.run([ctest, "--test-dir", build_dir, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
problems = []
tests = json.loads(listing)["tests"]
for test in tests:
    properties = {p["name"]: p["value"] for p in test.get("properties", [])}
    name = test["name"]
    for banned in ("PASS_REGULAR_EXPRESSION", "FAIL_REGULAR_EXPRESSION", "WILL_FAIL"):
        if banned in properties:
            problems.append(f"{name}: {banned} (a test passes on its exit code only)")
    labels = properties.get("LABELS", [])
    if "gpu" in labels and str(properties.get("SKIP_RETURN_CODE")) != "77":
        problems.append(f"{name}: labelled gpu without SKIP_RETURN_CODE 77")
    command = test.get("command") or []
    if command[-2:-1] == ["sh"] and "exit 77" in " ".join(command) and \
            str(properties.get("SKIP_RETURN_CODE")) != "77":
        problems.append(f"{name}: exits 77 without SKIP_RETURN_CODE 77")
for problem in problems:
    print(problem)
print(f"{len(tests)} tests checked, {len(problems)} problems")
sys.exit(1 if problems else 0)
