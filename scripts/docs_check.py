#!/usr/bin/env python3
"""Checks the project's documentation against the tree.

Usage: docs_check.py [--build-dir DIR] [REPO_ROOT]

Reads every Markdown file of the repository (README.md, docs/, bench/,
integrations/, ctest/*/README.md, ...) and the comments of the public
headers in include/, and fails (exit 1, one line per problem) unless:

* every relative link resolves, and so does its #anchor (GitHub's heading ids);
* every path-like `code` span (one with a '/' or a file extension) names a
  file or folder of the repository, relative to the repository root, to
  `src/`, or (a C include path) to an include folder; {a,b} and globs are
  expanded; paths of the install tree, of a build tree and of upstream
  projects are recognised by their prefixes (INSTALL_PREFIXES, BUILD_PREFIX,
  UPSTREAM_PATHS) and a build path must map to a folder of the repository;
* every named Rust item (`module::item`, `Type::method`, `file.rs::item`,
  `function()`) is defined where it is named: the last part in the file that
  defines the first (a module's file, or the file defining the type);
* every other identifier in `code` (`SCREAMING_CASE` constants, snake_case
  names, ctest names such as `suite.honest`) occurs in the code (not only in
  the docs), or is a known upstream name (UPSTREAM_NAMES); a name that looks
  like a ctest name must be a registered test;
* every label named (`label x`, `labelled x`, `-L x`) is a ctest label;
* every command of a ```sh block is listed in COMMANDS below with how it is
  checked: ("run", file) the file runs exactly that command (after joining
  continued lines and collapsing spaces); ("extracted", file, heading) the
  file extracts the doc's block under that heading and runs it as written;
  ("manual", reason) not run automatically, for the reason given;
* the version in include/amdgpu_dropin_hostcall.h is the last version of
  docs/c-api-changes.md;
* no benchmark figure appears in README.md or docs/ outside the generated
  docs/performance.md (bench/README.md is the benchmark's own record);
* the README stays short.

It checks names, not meaning: a sentence that names real code can still be
wrong. scripts/docs_check_test.py plants one false statement of each kind
and checks that this script fails on each.

Test names and labels come from `ctest -N` in --build-dir when given (the
ctest docs.check passes its build), else from the CMake files (literal names,
and `prefix_${var}` patterns).
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

README_MAX_LINES = 150

# Folders never read (build outputs, caches).
SKIP_DIRS = {".git", "target", "build", "node_modules", "__pycache__", ".mirror"}
# Where code lives (names in docs must occur there). Docs are not code.
CODE_EXTS = (".rs", ".c", ".h", ".cpp", ".hpp", ".inc", ".py", ".sh", ".cmake", ".txt", ".toml", ".in",
             ".map", ".supp", ".symbols")
CODE_FILES = {"CMakeLists.txt", "build.rs", "Cargo.toml", "run"}
# The checker and its self-test name false things on purpose: not code.
CHECKERS = {"scripts/docs_check.py", "scripts/docs_check_test.py"}
# File extensions that make a `span` a path.
PATH_EXTS = ("rs", "c", "h", "cpp", "hpp", "inc", "py", "sh", "md", "toml", "txt", "cmake", "in", "json",
             "svg", "supp", "map", "symbols", "so", "a", "pc", "lock")
# Include folders a C include path is relative to.
INCLUDE_ROOTS = ("include", "include/iree-vmem", "ctest/include",
                 "ctest/include/third_party/hsa-runtime-headers/include")
# Paths of the install tree (relative to its prefix), not of the repository.
INSTALL_PREFIXES = ("include/amdgpu_dropin", "lib/", "lib64/", "share/", "/usr/", "/opt/", "/etc/", "/tmp/",
                    "/proc/", "/dev/", "/sys/", "$", "~", "<", "$HOME")
# A build tree: build/<dir>/<path below the build dir>.
BUILD_PREFIX = re.compile(r"^build(/[^/]+)?(/|$)")
# Upstream files and folders named in the docs (IREE, ROCclr/CLR, ROCr,
# device libraries, LLVM): not in this repository.
UPSTREAM_PATHS = (
    "rocclr/", "hipamd/", "runtime/src/iree/", "iree/hal/drivers/amdgpu/util/vmem.c",
    "iree/hal/drivers/amdgpu/util/libhsa", "iree/hal/drivers/amdgpu/util/topology",
    "iree/base/", "third_party/", "ockl/", "src/ockl", "oclc/", "device/devhostcall", "device/devsanitizer",
    "device/device", "device/rocm/", "platform/", "thread/", "utils/", "hsa/", "amd_comgr/",
    "libhsakmt", "runtime/hsa-runtime/", "rocr-runtime", "clr/", "inc/amd_comgr",
    "projects/clr", "runtime/src", "device/devrpc", "device/devhcmessages", "shared/rpc", "os/",
)
# Files of upstream projects and of other builds, named by their bare name.
UPSTREAM_FILES = {"vmem.c", "rochostcall.cpp", "libhsa.c", "libamdhip64.so", "libiree_runtime_unified.a",
                  "devrpc.cpp", "devhostcall.cpp", "BUILD.bazel", "hostcall_impl.cl",
                  # ROCclr's own sources (the adapter is checked against them by hand)
                  "thread.cpp", "semaphore.cpp", "os_posix.cpp", "alloc.cpp", "debug.cpp", "context.cpp",
                  "memory.cpp"}
# What the build makes (cmake/library_names.cmake, cmake/*.pc.in, bench/CMakeLists.txt).
ARTEFACTS = {"libamdgpu_dropin.a", "libamdgpu_dropin.so", "amdgpu_dropin.pc", "amdgpu_dropin-iree-vmem.pc",
             "libhostcall_baseline.so"}
# Names of upstream code (and of the C library, HSA, IREE, ROCclr) named in
# the docs: not defined here, so not looked up in the tree.
UPSTREAM_NAMES = {
    "INSTALL_RPATH", "CMAKE_INSTALL_RPATH_USE_LINK_PATH",  # CMake's own properties
    "DT_NEEDED",                                           # ELF
    "iree_runtime_unified",                                # IREE's runtime target
    "libhsa_test", "topology_test", "vmem_test",           # IREE's own tests
    "dev.context",                                         # ROCclr's Device member
    "WITH_HSA_DEVICE",                                     # ROCclr's build macro
}
# C++ and Rust namespaces that are not this crate's modules: upstream C++
# (ROCclr's amd::, roc::, ROCr's classes), std's types, and this project's
# own C++ and CMake namespace amdgpu_dropin:: (its names must occur in the code).
FOREIGN_NAMESPACES = {"amd", "roc", "rocr", "Device", "MemObjMap", "InterruptSignal", "NonNull", "Instant",
                      "Duration", "Arc", "Mutex", "Once", "OnceLock", "AtomicU64", "AtomicBool", "Box", "Vec"}
OWN_FOREIGN_NAMESPACES = {"amdgpu_dropin"}
# Folders a doc's relative paths may also start from (besides the repository and src/).
DOC_BASES = {"bench/README.md": ("bench/", "bench/results/")}
# Docs whose sh blocks are recipes run by hand against upstream checkouts,
# with the reason; every command of such a doc is "manual".
DOC_MANUAL = {
    "integrations/rocclr/README.md": "compiles the adapter against a ROCm/clr checkout by hand (needs clang, "
                                     "Debian's ROCm headers and the upstream sources; the adapter's own tests "
                                     "are the rocclr ctests)",
}

# Every command shown in a ```sh block, and how it is checked (see the module docs).
COMMANDS = {
    # README.md
    "bash scripts/test.sh": ("run", ".ci/run"),
    "scripts/demo.sh": ("manual", "configures and builds a tree of its own (build/demo); the demo it runs is "
                        "the ctest demo (demo/CMakeLists.txt), run by scripts/test.sh"),
    "scripts/demo.sh --system-hsa": ("manual", "as scripts/demo.sh; its run is the ctest demo.system_hsa"),
    "cmake -S . -B build/rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DAMDGPU_DROPIN_BUILD_TESTS=OFF":
        ("manual", "a release build without tests; consumer.install installs the test build the same way"),
    "cmake --build build/rel && cmake --install build/rel --prefix /usr/local":
        ("manual", "installing to /usr/local needs root; consumer.install installs to a temporary prefix"),
    "cmake --build build/rel": ("manual", "as above"),
    "cmake --install build/rel --prefix /usr/local": ("manual", "as above"),
    "export PKG_CONFIG_PATH=/usr/local/lib/pkgconfig":
        ("extracted", "ctest/consumer/consumer.sh", "## A first C program"),
    "cc -o first first.c $(pkg-config --cflags --libs amdgpu_dropin) -I/opt/rocm/include "
    "-L/opt/rocm/lib -lhsa-runtime64 -Wl,-rpath,/usr/local/lib:/opt/rocm/lib":
        ("extracted", "ctest/consumer/consumer.sh", "## A first C program"),
    "./first": ("extracted", "ctest/consumer/consumer.sh", "## A first C program"),
    # docs/install.md
    ("docs/install.md", "export PKG_CONFIG_PATH=/usr/local/lib/pkgconfig"):
        ("manual", "the install prefix of the reader's install; consumer.pkg_config sets it to its test prefix"),
    "cc app.c $(pkg-config --cflags --libs amdgpu_dropin) -Wl,-rpath,/usr/local/lib":
        ("manual", "app.c is the reader's; consumer.pkg_config builds consumer.c with the same pkg-config "
                   "flags in the installed test tree"),
    "cc app.c $(pkg-config --cflags amdgpu_dropin-iree-vmem) -I/path/to/iree/runtime/src -I/path/to/iree "
    "$(pkg-config --libs amdgpu_dropin) -Wl,-rpath,/usr/local/lib":
        ("manual", "needs an IREE checkout; consumer.pkg_config uses pkg-config --cflags amdgpu_dropin-iree-vmem "
                   "with the stand-in IREE headers"),
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
    "cargo test --locked -p amdgpu-dropin-hostcall-core protocol::classic":
        ("manual", "a filtered part of scripts/test.sh's cargo test --workspace"),
    'LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --locked --release '
    '-p amdgpu-dropin-hostcall-core --test loom_phase':
        ("manual", "one of the loom models scripts/test.sh runs, with the same command"),
    "cargo test --locked --features generate-headers --test headers":
        ("manual", "the header drift test alone; scripts/test.sh runs it within cargo test --workspace --locked "
                   "--features amdgpu-dropin/generate-headers"),
    "AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers":
        ("manual", "rewrites the checked-in headers; the drift test (tests/headers.rs) names this command"),
    "build/test/ctest/hostcall/hc_probes --soak 120": ("extracted", "ctest/docs/soak_command.sh", "## Soak"),
    "HC_DLCLOSE_ROUNDS=500 build/test/ctest/hostcall/hc_dlclose":
        ("extracted", "ctest/docs/soak_command.sh", "## Soak"),
    "cmake -S . -B build/gpu -G Ninja -DAMDGPU_DROPIN_USE_SYSTEM_HSA=ON && cmake --build build/gpu && "
    "ctest --test-dir build/gpu -L gpu -V":
        ("manual", "scripts/test.sh runs the same configuration (build/test-system-hsa, with the test build's "
                   "cargo target dir) when a system ROCr is installed"),
    "python3 scripts/docs_check.py": ("run", "scripts/test.sh"),
    # bench/README.md
    "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo":
        ("manual", "the benchmark's full run (minutes, results checked in); ctest's bench-smoke label runs "
                   "hostcall_bench briefly"),
    "cmake --build build --target hostcall_bench": ("manual", "as above"),
    "build/bench/hostcall_bench --json run.json": ("manual", "as above"),
    "build/bench/hostcall_bench --sections device,heavy,paced --json part1.json": ("manual", "as above"),
    "build/bench/hostcall_bench --sections harness,wakeup,lost,threads,idle --json part2.json":
        ("manual", "as above"),
    "python3 bench/report/report.py run.json": ("file", "bench/CMakeLists.txt", "bench/report/report.py"),
    "python3 bench/report/merge_runs.py --out run.json part1.json part2.json":
        ("manual", "joins the sections of a full run; bench/report/runs.py's join is what perf_doc.py uses"),
    "python3 bench/report/merge_runs.py --median --out median.json run1.json run2.json":
        ("manual", "as above"),
    "python3 bench/report/perf_doc.py": ("file", "bench/CMakeLists.txt", "bench/report/perf_doc.py --check"),
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
# Where the figure rule applies: the user docs (bench/README.md is the
# benchmark's own record; ctest READMEs describe stand-ins).
FIGURE_CHECKED = re.compile(r"^(README\.md|docs/.*\.md)$")

RUST_KEYWORDS_DEF = r"(?:fn|struct|enum|union|trait|type|const|static|mod|macro_rules!)"


class Tree:
    """What the repository holds: files, code text, tests and labels."""

    def __init__(self, root, build_dir):
        self.root = root
        self.files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build")]
            for name in filenames:
                self.files.append(os.path.relpath(os.path.join(dirpath, name), root))
        self.basenames = {}
        for rel in self.files:
            self.basenames.setdefault(os.path.basename(rel), []).append(rel)
        self.code = {}
        for rel in self.files:
            name = os.path.basename(rel)
            if rel.endswith(CODE_EXTS) or name in CODE_FILES:
                if rel.startswith("bench/results/") or rel.startswith("docs/") or rel in CHECKERS:
                    continue
                try:
                    with open(os.path.join(root, rel), encoding="utf-8") as f:
                        self.code[rel] = f.read()
                except (UnicodeDecodeError, OSError):
                    pass
        self.words = set()
        for text in self.code.values():
            self.words.update(re.findall(r"[A-Za-z_][\w.]*\w|[A-Za-z_]", text))
        # The benchmark's run names (its README names them): words of its results.
        self.result_words = set()
        for rel in self.files:
            if rel.startswith("bench/results/") and rel.endswith((".json", ".txt", ".md")):
                try:
                    with open(os.path.join(root, rel), encoding="utf-8") as f:
                        self.result_words.update(re.findall(r"[A-Za-z_][\w.]*\w", f.read()))
                except (UnicodeDecodeError, OSError):
                    pass
            if rel.startswith("bench/results/"):
                stem = os.path.splitext(os.path.basename(rel))[0]
                pieces = stem.split("_")
                for i in range(len(pieces)):
                    self.result_words.add("_".join(pieces[i:]))
        self.parts = set()
        for word in self.words:
            pieces = word.split("_")
            for i in range(len(pieces)):
                for j in range(i + 1, len(pieces) + 1):
                    if (i, j) != (0, len(pieces)):
                        self.parts.add("_".join(pieces[i:j]))
        self.rust = {rel: text for rel, text in self.code.items() if rel.endswith(".rs")}
        self.tests, self.test_patterns, self.labels = self.ctest_facts(build_dir)

    def ctest_facts(self, build_dir):
        names, patterns, labels = set(), [], set()
        cmake = {rel: t for rel, t in self.code.items() if os.path.basename(rel) == "CMakeLists.txt"
                 or rel.endswith(".cmake")}
        for text in cmake.values():
            for name in re.findall(r"add_test\(\s*NAME\s+([^\s)]+)", text) + \
                    re.findall(r"amdgpu_dropin_skipped_test\(\s*([^\s)]+)", text):
                if "${" in name:
                    if len(name.split("${")[0]) < 3:
                        continue  # no literal prefix: a helper's argument, not a name
                    patterns.append(re.compile("^" + re.sub(r"\\\$\\\{\w+\\\}", r"[\\w.-]+", re.escape(name)) + "$"))
                else:
                    names.add(name)
            for group in re.findall(r"LABELS\s+([^)\n]*)", text):
                for token in group.split():
                    if re.fullmatch(r"[a-z][\w-]*", token) and token not in {"ENVIRONMENT", "TIMEOUT"}:
                        labels.add(token)
        if build_dir:
            try:
                out = subprocess.run(["ctest", "--test-dir", build_dir, "-N", "--show-only=json-v1"],
                                     capture_output=True, text=True, timeout=120, check=True).stdout
                data = json.loads(out)
                names, patterns, labels = set(), [], set()
                for test in data.get("tests", []):
                    names.add(test["name"])
                    for prop in test.get("properties", []):
                        if prop.get("name") == "LABELS":
                            labels.update(prop.get("value", []))
            except (OSError, subprocess.SubprocessError, ValueError) as e:
                problems.append(f"--build-dir {build_dir}: ctest -N failed ({e}); names checked statically")
        return names, patterns, labels

    def exists(self, rel):
        rel = rel.rstrip("/")
        if any(c in rel for c in "*?["):
            return bool(glob.glob(os.path.join(self.root, rel)))
        return rel == "" or os.path.exists(os.path.join(self.root, rel))

    def is_target(self, rel):
        """A build output: `dir/name` where dir/CMakeLists.txt makes the target `name`."""
        folder, name = os.path.split(rel.rstrip("/"))
        text = self.code.get(os.path.join(folder, "CMakeLists.txt"), "")
        return re.search(r"add_(?:executable|library)\(\s*" + re.escape(name) + r"\b", text) is not None

    def cxx_text(self):
        if not hasattr(self, "_cxx"):
            self._cxx = "\n".join(t for rel, t in self.code.items() if rel.endswith((".c", ".h", ".cpp", ".hpp")))
        return self._cxx

    def occurs(self, text):
        return any(text in code for code in self.code.values())

    def is_test(self, name):
        return name in self.tests or any(p.match(name) for p in self.test_patterns)

    def module_files(self, name):
        """Rust files that are module `name` (name.rs or name/mod.rs)."""
        return [rel for rel in self.rust if rel.endswith("/" + name + ".rs") or rel.endswith("/" + name + "/mod.rs")
                or rel == name + ".rs"]

    def defining_files(self, name):
        """Rust files that define type, trait, module or function `name`, or implement it."""
        found = set(self.module_files(name))
        pattern = re.compile(r"\b(?:struct|enum|union|trait|type|fn|mod)\s+" + re.escape(name) + r"\b"
                             r"|\bimpl\b[^{;]*\b" + re.escape(name) + r"\b")
        for rel, text in self.rust.items():
            if pattern.search(text):
                found.add(rel)
        return sorted(found)

    def defines(self, rel, item):
        """Whether Rust file `rel` defines `item` (an item, a method, a field or a variant)."""
        text = self.rust.get(rel, "")
        if re.search(RUST_KEYWORDS_DEF + r"\s+" + re.escape(item) + r"\b", text):
            return True
        if item[:1].isupper():
            # A variant or an associated const: a word of that file.
            return re.search(r"\b" + re.escape(item) + r"\b", text) is not None
        # A field (`name: Type`).
        return re.search(r"^\s*(pub(\([\w:]+\))?\s+)?" + re.escape(item) + r"\s*:", text, re.M) is not None


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


def prose(text):
    """(line number, line) outside fenced code blocks."""
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            yield number, line


def sh_commands(text):
    """(line number, command) for each command of each ```sh block."""
    block = False
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not block:
            block = stripped == "```sh"
            continue
        if stripped == "```":
            block = False
            continue
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        command = normalize(re.sub(r"\s+#.*$", "", pending + stripped))
        pending = ""
        if command:
            yield start, command


def normalize(command):
    return re.sub(r"\s+", " ", command).strip()


def run_lines(text):
    """The commands a script or CMake file runs, continued lines joined."""
    return {normalize(line) for line in re.sub(r"\\\n\s*", " ", text).splitlines()}


def is_path_like(span):
    if "::" in span or span.startswith(("-", "--")) or re.match(r"^[a-z]+://", span):
        return False
    if "/" in span:
        return re.fullmatch(r"[\w.${}*,/+-]+/?", span) is not None and not re.fullmatch(r"[\d./]+", span)
    return re.fullmatch(r"[\w.*{},+-]+\.(" + "|".join(PATH_EXTS) + r")", span) is not None


def check_path(tree, where, span, doc=""):
    span = re.sub(r":\d+(-\d+)?$", "", span)
    if span.startswith(INSTALL_PREFIXES) or span.startswith(UPSTREAM_PATHS) or span.startswith("target/"):
        return
    if span in UPSTREAM_FILES or span in ARTEFACTS:
        return
    if re.fullmatch(r"[a-z]+_\w+(/\w+)+", span) and not tree.exists(span.split("/")[0]):
        return  # alternatives of one name: hsa_amd_signal_wait_all/any
    build = BUILD_PREFIX.match(span)
    if build:
        below = span[build.end():]
        if not below:
            return
        # A build output lies where the source folder that makes it lies.
        folder = below.rstrip("/")
        while folder and not tree.exists(folder):
            folder = os.path.dirname(folder)
        if not folder and "/" in below.rstrip("/"):
            problem(where, f"names a build path whose source folder does not exist: {span}")
        return
    bases = ("", "src/") + tuple(r + "/" for r in INCLUDE_ROOTS) + DOC_BASES.get(doc, ())
    for candidate in expand(span):
        if "/" not in candidate.rstrip("/") and not candidate.endswith("/"):
            # A bare file name: some file of the repository has it.
            if not (tree.basenames.get(candidate) or any(c in candidate for c in "*?[")):
                problem(where, f"names a file that does not exist anywhere in the repository: {candidate}")
            continue
        if any(tree.exists(base + candidate) for base in bases):
            continue
        if doc.startswith("bench/") and any(tree.exists(base + candidate + ".json") for base in bases):
            continue  # a run, named without its .json
        if tree.is_target(candidate):
            continue
        problem(where, f"names a path that does not exist (relative to the repository, src/ or an "
                       f"include folder): {candidate}")


def cxx_names(tree, parts):
    """Whether every part occurs as a word of the C/C++ code (the ROCclr
    stand-ins and the adapter model ROCclr's classes)."""
    text = tree.cxx_text()
    return all(re.search(r"\b" + re.escape(p) + r"\b", text) for p in parts)


def check_rust_item(tree, where, span):
    parts = span.rstrip("()").split("::")
    if parts[0] in {"std", "core", "alloc", "libc", "loom", "spin", "cbindgen", "static_assertions"}:
        return
    if parts[0] == "crate":
        parts = parts[1:]
    if not parts or not all(re.fullmatch(r"\w+(\.rs)?", p) for p in parts):
        return
    item = parts[-1]
    if parts[0] in OWN_FOREIGN_NAMESPACES:
        if not tree.occurs(span.rstrip("()")):
            problem(where, f"names {span}, which occurs nowhere in the code")
        return
    if parts[0] in FOREIGN_NAMESPACES or (len(parts) > 1 and parts[-2] in FOREIGN_NAMESPACES):
        return
    if len(parts) == 1:
        if not any(tree.defines(rel, item) for rel in tree.rust):
            problem(where, f"names a Rust item that is not defined: {span}")
        return
    owner = parts[-2]
    if owner.endswith(".rs"):
        files = tree.basenames.get(owner, [])
        files = [f for f in files if f.endswith(".rs")]
        if not files:
            problem(where, f"names a Rust file that does not exist: {owner} (in {span})")
            return
    else:
        files = tree.defining_files(owner)
        if not files:
            if not cxx_names(tree, parts):
                problem(where, f"names a Rust module or type that does not exist: {owner} (in {span})")
            return
    if not any(tree.defines(rel, item) for rel in files):
        # A module path may name a whole module (a test filter): module/item.rs.
        if tree.module_files(item) and any(f.endswith("/" + owner + "/mod.rs") or f.endswith("/" + owner + ".rs")
                                           for f in files):
            return
        if not cxx_names(tree, parts):
            problem(where, f"names {item}, which {', '.join(files)} does not define (in {span})")


def check_name(tree, where, span, doc=""):
    """A bare identifier or test name in `code`."""
    name = span.rstrip("()")
    if name in UPSTREAM_NAMES or name in UPSTREAM_FILES:
        return
    if re.fullmatch(r"lib[\w+-]*\.so(\.\d+)*", name):
        if not (tree.occurs(name) or name.split(".so")[0] + ".so" in ARTEFACTS | UPSTREAM_FILES):
            problem(where, f"names a library that the code never names: {name}")
        return
    prefixes = {t.split(".")[0] for t in tree.tests if "." in t} | \
        {p.pattern[1:].split("\\.")[0] for p in tree.test_patterns if "\\." in p.pattern}
    looks_like_test = re.fullmatch(r"[a-z][\w-]*\.[\w.*-]+", name) is not None and not is_path_like(name) \
        and name.split(".")[0] in prefixes
    if re.fullmatch(r"[A-Za-z_]\w*\.\w+", name) and not looks_like_test:
        # A member (`struct_t.field`): both names occur in the code.
        if not all(part in tree.words or part in tree.parts for part in name.split(".")):
            problem(where, f"names {name}, which occurs nowhere in the code")
        return
    if looks_like_test:
        if "*" in name:
            # `hsa_sim.*`: some registered test (or, statically, a pattern) matches.
            pattern = re.compile("^" + re.escape(name).replace(r"\*", r"[\w.-]*") + "$")
            if not any(pattern.match(t) for t in tree.tests) and not tree.test_patterns:
                problem(where, f"names tests that are not registered: {name}")
            return
        if not tree.is_test(name):
            problem(where, f"names a ctest that is not registered: {name}")
        return
    if span.endswith("()") and re.fullmatch(r"[a-z_]\w*", name):
        if name in tree.words:
            return
        problem(where, f"names a function that the code does not have: {span}")
        return
    if re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+", name) or re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)+", name):
        # A whole word of the code, or a part of one (`ALREADY_ENABLED` of
        # AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_ENABLED), or a test or a run.
        if name in tree.words or name in tree.parts or tree.is_test(name):
            return
        if doc.startswith("bench/") and name in tree.result_words:
            return
        problem(where, f"names {name}, which occurs nowhere in the code")


def check_labels(tree, where, line):
    for label in re.findall(r"\blabel(?:led|s)?\s+`([^`]+)`", line) + re.findall(r"`-L\s+([\w-]+)`", line) \
            + re.findall(r"\bctest\b[^`\n]*\s-L\s+([\w-]+)", line):
        for one in re.split(r"[,\s]+", label):
            if one and one not in tree.labels:
                problem(where, f"names a ctest label that no test has: {one}")


def check_item_in_file(tree, where, line):
    """"`Item` in `path/file.rs`": the file defines the item."""
    for item, path in re.findall(r"`(\w+)`\s+(?:is\s+)?in\s+`([\w/.-]+\.rs)`", line):
        rel = path if path in tree.rust else "src/" + path if "src/" + path in tree.rust else None
        if rel and not tree.defines(rel, item):
            problem(where, f"says {item} is in {path}, which does not define it")


def check_label_table(tree, where, line, state):
    """The first column of a table whose header's first cell is "label"."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
    if cells is None:
        state["labels"] = False
        return
    if cells and cells[0].lower() == "label":
        state["labels"] = True
        return
    if state.get("labels"):
        for label in re.findall(r"`([^`]+)`", cells[0]):
            if label not in tree.labels:
                problem(where, f"lists a ctest label that no test has: {label}")


def check_spans(tree, where, line, doc=""):
    for span in re.findall(r"`([^`]+)`", line):
        span = span.strip()
        if not span or " " in span or "=" in span or span.startswith("#"):
            continue
        if is_path_like(span):
            check_path(tree, where, span, doc)
        elif re.fullmatch(r"(\w+(\.rs)?::)+\w+(\(\))?", span):
            check_rust_item(tree, where, span)
        else:
            check_name(tree, where, span, doc)


def check_markdown(tree, rel):
    path = os.path.join(tree.root, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    base = os.path.dirname(rel)
    if rel == "README.md" and len(text.splitlines()) > README_MAX_LINES:
        problem(rel, f"{len(text.splitlines())} lines; keep it at most {README_MAX_LINES}")
    table = {}
    for number, line in prose(text):
        where = f"{rel}:{number}"
        check_item_in_file(tree, where, line)
        check_label_table(tree, where, line, table)
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            target_rel = os.path.normpath(os.path.join(base, file_part)) if file_part else rel
            if not tree.exists(target_rel):
                problem(where, f"link to a missing file: {target}")
                continue
            if anchor and target_rel.endswith(".md") and anchor not in anchors(os.path.join(tree.root, target_rel)):
                problem(where, f"link to a missing section: {target}")
        check_spans(tree, where, line, rel)
        check_labels(tree, where, line)
        if rel not in FIGURE_FREE_EXCEPT and FIGURE_CHECKED.match(rel):
            match = FIGURE.search(line)
            if match:
                problem(where, f"a benchmark figure ({match.group(0)!r}) outside docs/performance.md")
    for number, command in sh_commands(text):
        check_command(tree, f"{rel}:{number}", rel, command)


def check_command(tree, where, doc, command):
    how = COMMANDS.get((doc, command)) or COMMANDS.get(command)
    if doc in DOC_MANUAL:
        how = ("manual", DOC_MANUAL[doc])
    for label in re.findall(r"\s-L\s+([\w-]+)", command):
        if label not in tree.labels:
            problem(where, f"runs a ctest label that no test has: {label}")
    if how is None:
        problem(where, f"command neither run by a test nor listed in scripts/docs_check.py: {command}")
        return
    if how[0] == "manual":
        return
    evidence = how[1]
    text = tree.code.get(evidence)
    if text is None:
        problem(where, f"{evidence} (said to run `{command}`) does not exist")
    elif how[0] == "run":
        if command not in run_lines(text):
            problem(where, f"{evidence} does not run exactly `{command}`")
    elif how[0] == "extracted":
        heading = how[2]
        if heading not in text:
            problem(where, f"{evidence} no longer extracts the block under {heading!r} (said to run `{command}`)")
        with open(os.path.join(tree.root, doc), encoding="utf-8") as f:
            section = section_text(f.read(), heading)
        if command not in {c for _, c in sh_commands(section)}:
            problem(where, f"`{command}` is not in the sh block under {heading!r}, which {evidence} runs")


def section_text(text, heading):
    out, on = [], False
    for line in text.splitlines():
        if line.startswith(heading):
            on = True
            continue
        if on and line.startswith("## "):
            break
        if on:
            out.append(line)
    return "\n".join(out)


def header_comments(text):
    """(line number, comment text) of each comment line of a C header."""
    in_block = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if in_block or stripped.startswith("/*"):
            in_block = "*/" not in stripped
            yield number, stripped.strip("/*").strip()
        elif "//" in stripped:
            yield number, stripped.split("//", 1)[1].strip()


def check_header(tree, rel):
    with open(os.path.join(tree.root, rel), encoding="utf-8") as f:
        text = f.read()
    for number, comment in header_comments(text):
        where = f"{rel}:{number}"
        check_spans(tree, where, comment)
        # Paths written without backticks (e.g. "Generated ... from src/x.rs").
        for token in re.findall(r"(?<![\w/.<])((?:src|docs|include|ctest|cmake|scripts|tests|codegen)/[\w./-]*\w)",
                                comment):
            check_path(tree, where, token)


def check_api_version(tree):
    header = tree.code.get("include/amdgpu_dropin_hostcall.h", "")
    match = re.search(r"#define AMDGPU_DROPIN_HOSTCALL_API_VERSION (\d+)", header)
    log_path = os.path.join(tree.root, "docs/c-api-changes.md")
    if not match:
        problem("include/amdgpu_dropin_hostcall.h", "no AMDGPU_DROPIN_HOSTCALL_API_VERSION")
        return
    if not os.path.exists(log_path):
        problem("docs/c-api-changes.md", "missing: the C API's change log")
        return
    with open(log_path, encoding="utf-8") as f:
        versions = re.findall(r"^## Version (\d+)\s*$", f.read(), re.M)
    if not versions or versions[-1] != match.group(1):
        problem("docs/c-api-changes.md", f"last entry is version {versions[-1] if versions else 'none'}, the "
                                         f"header says {match.group(1)}")
    if versions != [str(v) for v in range(1, len(versions) + 1)]:
        problem("docs/c-api-changes.md", f"versions are not 1, 2, ... in order: {versions}")


def markdown_files(tree):
    return sorted(rel for rel in tree.files if rel.endswith(".md") and not rel.startswith("bench/results/"))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Exit 0 when every check holds, 1 with one line per problem.")
    parser.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="repository root (default: this script's repository)")
    parser.add_argument("--build-dir", help="a configured CMake build: test names and labels from its ctest -N")
    args = parser.parse_args(argv)
    tree = Tree(os.path.abspath(args.root), args.build_dir)
    docs = markdown_files(tree)
    headers = sorted(rel for rel in tree.files if rel.startswith("include/") and rel.endswith((".h", ".hpp")))
    for rel in docs:
        check_markdown(tree, rel)
    for rel in headers:
        check_header(tree, rel)
    check_api_version(tree)
    ci = tree.code.get(".ci/run", "")
    if "bash scripts/test.sh" not in run_lines(ci):
        problem(".ci/run", "does not run bash scripts/test.sh, the README's test command")
    if problems:
        print("\n".join(problems))
        print(f"docs_check: {len(problems)} problem(s) in {len(docs)} Markdown files and {len(headers)} headers")
        return 1
    print(f"docs_check: {len(docs)} Markdown files and {len(headers)} headers checked: links, paths, Rust items, "
          f"names, tests, labels, commands, API version, figures")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
