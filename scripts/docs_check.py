#!/usr/bin/env python3
"""Checks README.md and docs/*.md against the tree (ctest docs.check, and a
step of scripts/test.sh):

* every relative link resolves, and so does its #anchor (GitHub's heading ids);
* every repository path named in `code` exists (globs and {a,b} expanded);
* every command in a ```sh block is listed in COMMANDS below, with what runs
  it: a script or test whose file must contain the given text, or a reason
  why it is checked by hand;
* no benchmark figure appears outside the generated docs/performance.md;
* the README stays short.

Exit 0 when all holds, 1 with one line per problem otherwise.
Usage: docs_check.py [REPO_ROOT]
"""

import glob
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))

README_MAX_LINES = 150

# Top-level names a `code` span must start with to count as a repository path.
TOP = {
    "src", "ctest", "include", "cmake", "scripts", "docs", "tests", "bench", "fuzz", "demo",
    "hsa-sys", "codegen", "integrations", ".ci",
}
ROOT_FILES = {"README.md", "LICENSE", "Cargo.toml", "Cargo.lock", "build.rs", "CMakeLists.txt", "rustfmt.toml"}
# Paths of the install tree, not of the repository.
INSTALL_PREFIXES = ("include/amdgpu_dropin", "lib/")

# Every command shown in a ```sh block, and how it is checked:
#   ("file", path, text)  the file (a script or a test) contains `text` and runs the command;
#   ("manual", reason)    not run automatically, for the reason given.
COMMANDS = {
    # README.md
    "scripts/demo.sh": ("file", "ctest/CMakeLists.txt", "demo"),
    "scripts/test.sh": ("file", ".ci/run", "bash scripts/test.sh"),
    "cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DAMDGPU_DROPIN_BUILD_TESTS=OFF":
        ("manual", "a release build without tests; consumer.install installs the test build the same way"),
    "cmake --build build/rel && cmake --install build/rel --prefix /usr/local":
        ("manual", "installing to /usr/local needs root; consumer.install installs to a temporary prefix"),
    "cmake --build build/rel":
        ("manual", "as above"),
    "cmake --install build/rel --prefix /usr/local":
        ("manual", "as above"),
    "export PKG_CONFIG_PATH=/usr/local/lib/pkgconfig":
        ("file", "ctest/consumer/consumer.sh", "## A first C program"),
    "cc -o first first.c $(pkg-config --cflags --libs amdgpu_dropin) -I/opt/rocm/include "
    "-L/opt/rocm/lib -lhsa-runtime64 -Wl,-rpath,/usr/local/lib:/opt/rocm/lib":
        ("file", "ctest/consumer/consumer.sh", "## A first C program"),
    "./first": ("file", "ctest/consumer/consumer.sh", "## A first C program"),
    # docs/install.md
    "cc app.c $(pkg-config --cflags --libs amdgpu_dropin) -Wl,-rpath,/usr/local/lib":
        ("file", "ctest/consumer/consumer.sh", "pkg-config --libs amdgpu_dropin"),
    "cc app.c $(pkg-config --cflags amdgpu_dropin-iree-vmem) -I/path/to/iree/runtime/src -I/path/to/iree "
    "$(pkg-config --libs amdgpu_dropin) -Wl,-rpath,/usr/local/lib":
        ("file", "ctest/consumer/consumer.sh", "pkg-config --cflags amdgpu_dropin-iree-vmem"),
    # docs/iree.md
    "export IREE_HAL_AMDGPU_LIBHSA_PATH=<this project's build dir>/ctest/hsa_runtime":
        ("manual", "needs an IREE checkout and build; hsa_sim.iree_libhsa.* loads the runtime as IREE does"),
    "export HSA_SIM_GPU_COUNT=2": ("manual", "as above"),
    "ctest -R 'libhsa_test|topology_test|vmem_test'": ("manual", "as above, in IREE's build dir"),
    # docs/testing.md
    "ctest --test-dir build/test -R '^hostcall_phase$' --output-on-failure":
        ("manual", "reruns one test of scripts/test.sh's build; the test itself runs in the suite"),
    "ctest --test-dir build/test -R consumer -V": ("manual", "as above"),
    "cargo test --locked --lib hostcall::listener::pacing":
        ("manual", "a filtered part of scripts/test.sh's cargo test"),
    "cargo test --locked --features generate-headers --test headers":
        ("file", "scripts/test.sh", "--features amdgpu-dropin/generate-headers"),
    "AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers":
        ("file", "tests/headers.rs", "AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers"),
    "build/test/ctest/hostcall/hc_probes --soak 120": ("file", "ctest/docs/soak_command.sh", "--soak 2"),
    "HC_DLCLOSE_ROUNDS=500 build/test/ctest/hostcall/hc_dlclose":
        ("file", "ctest/docs/soak_command.sh", "HC_DLCLOSE_ROUNDS"),
    "cmake -S . -B build/gpu -G Ninja -DAMDGPU_DROPIN_USE_SYSTEM_HSA=ON && cmake --build build/gpu && "
    "ctest --test-dir build/gpu -L gpu -V":
        ("file", "scripts/test.sh", "-DAMDGPU_DROPIN_USE_SYSTEM_HSA=ON"),
}

# Benchmark figures (measured ratios, percentiles, CPU costs, throughput):
# only docs/performance.md, generated from bench/results/, may hold them.
FIGURE = re.compile(
    r"\d+\.\d+\s*×"                                   # a measured ratio, 0.84×
    r"|\bp(50|90|99)\b[^.\n]{0,40}\d"                 # a percentile with a value
    r"|\d+(\.\d+)?\s*(ms|µs|us|ns) (of )?CPU"         # CPU cost
    r"|\d[\d,.]*\s*round trips/s"                     # throughput
)
FIGURE_FREE_EXCEPT = {"docs/performance.md"}

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def slug(heading):
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                found.add(slug(line.lstrip("#")))
    return found


def expand(path):
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    out = []
    for alternative in match.group(1).split(","):
        out.extend(expand(path[: match.start()] + alternative + path[match.end():]))
    return out


def exists(rel):
    rel = rel.rstrip("/")
    if any(c in rel for c in "*?["):
        return bool(glob.glob(os.path.join(ROOT, rel)))
    return os.path.exists(os.path.join(ROOT, rel))


def strip_code(text):
    """Text outside fenced code blocks, with line numbers."""
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            yield number, line


def commands(text):
    """(line number, command) for each command of each ```sh block."""
    block = None
    pending_line, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if block is None:
            if stripped == "```sh":
                block = []
            continue
        if stripped == "```":
            block = None
            continue
        if not pending_line:
            start = number
        if stripped.endswith("\\"):
            pending_line += stripped[:-1].rstrip() + " "
            continue
        command = re.sub(r"\s+#.*$", "", pending_line + stripped).strip()
        pending_line = ""
        if command:
            yield start, re.sub(r"\s+", " ", command)


def check_file(rel):
    path = os.path.join(ROOT, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    base = os.path.dirname(rel)

    if rel == "README.md" and len(text.splitlines()) > README_MAX_LINES:
        problem(rel, f"{len(text.splitlines())} lines; keep it at most {README_MAX_LINES}")

    for number, line in strip_code(text):
        where = f"{rel}:{number}"
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            target_rel = os.path.normpath(os.path.join(base, file_part)) if file_part else rel
            if not exists(target_rel):
                problem(where, f"link to a missing file: {target}")
                continue
            if anchor and target_rel.endswith(".md") and anchor not in anchors(os.path.join(ROOT, target_rel)):
                problem(where, f"link to a missing section: {target}")
        for span in re.findall(r"`([^`]+)`", line):
            if " " in span or "<" in span or "=" in span or span.startswith(INSTALL_PREFIXES):
                continue
            head = span.split("/")[0]
            if not ((head in TOP and "/" in span) or span in ROOT_FILES or re.fullmatch(r"cbindgen[\w*-]*\.toml", span)):
                continue
            for candidate in expand(span):
                if not exists(candidate):
                    problem(where, f"names a path that does not exist: {candidate}")
        if rel not in FIGURE_FREE_EXCEPT:
            match = FIGURE.search(line)
            if match:
                problem(where, f"a benchmark figure ({match.group(0)!r}) outside docs/performance.md")

    for number, command in commands(text):
        where = f"{rel}:{number}"
        how = COMMANDS.get(command)
        if how is None:
            problem(where, f"command not run by a test nor listed in scripts/docs_check.py: {command}")
        elif how[0] == "file":
            evidence = os.path.join(ROOT, how[1])
            if not os.path.exists(evidence):
                problem(where, f"{how[1]} (said to run `{command}`) does not exist")
            else:
                with open(evidence, encoding="utf-8") as f:
                    if how[2] not in f.read():
                        problem(where, f"{how[1]} no longer contains {how[2]!r} (said to run `{command}`)")


def main():
    files = ["README.md"] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))
    )
    for rel in files:
        check_file(rel)
    # CI runs exactly the README's test command.
    with open(os.path.join(ROOT, ".ci/run"), encoding="utf-8") as f:
        if "bash scripts/test.sh" not in f.read():
            problem(".ci/run", "does not run scripts/test.sh, the README's test command")
    if problems:
        print("\n".join(problems))
        print(f"docs_check: {len(problems)} problem(s) in {len(files)} files")
        return 1
    print(f"docs_check: {len(files)} files checked: links, paths, commands, figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
