//! Generates the C headers from the Rust source with cbindgen: the public
//! headers in `include/`, and the C test suite's constants header
//! (`ctest/include/amdgpu_dropin_hostcall_constants.h`, not installed).
//!
//! The checked-in headers are what users (and the tests) compile against.
//! Every build writes freshly generated copies to `$OUT_DIR/headers/`; the
//! test `tests/headers.rs` fails when they differ from the checked-in ones. To refresh the checked-in headers
//! after changing the C surface, run:
//!
//!     AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build
//!
//! Inputs are listed file by file (no `cargo metadata` run) so the build stays
//! fast and works offline.

use std::path::{Path, PathBuf};

struct Header {
    /// cbindgen configuration, relative to the crate root.
    config: &'static str,
    /// Rust sources that hold the header's C surface.
    sources: &'static [&'static str],
    /// Path below `include/`.
    output: &'static str,
}

const HEADERS: &[Header] = &[
    Header {
        config: "cbindgen.toml",
        sources: &["src/vmem/abi.rs", "src/ffi/vmem.rs"],
        output: "iree/hal/drivers/amdgpu/util/vmem.h",
    },
    Header { config: "cbindgen-hostcall.toml", sources: &["src/ffi/hostcall.rs"], output: "rochostcall.hpp" },
    // Test-suite only (not installed): constants the C tests share with the library.
    Header {
        config: "cbindgen-test-constants.toml",
        sources: &["src/hostcall/tunables.rs"],
        output: "../ctest/include/amdgpu_dropin_hostcall_constants.h",
    },
];

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("headers");
    let update = std::env::var_os("AMDGPU_DROPIN_UPDATE_HEADERS").is_some_and(|v| v == "1");
    println!("cargo:rerun-if-env-changed=AMDGPU_DROPIN_UPDATE_HEADERS");
    for header in HEADERS {
        generate(&root, &out, header, update);
    }
}

fn generate(root: &Path, out: &Path, header: &Header, update: bool) {
    let config_path = root.join(header.config);
    println!("cargo:rerun-if-changed={}", config_path.display());
    let existing: Vec<PathBuf> = header
        .sources
        .iter()
        .map(|s| root.join(s))
        .inspect(|p| println!("cargo:rerun-if-changed={}", p.display()))
        .filter(|p| p.exists())
        .collect();
    if existing.len() != header.sources.len() || !config_path.exists() {
        // That half of the C surface is not written yet.
        return;
    }
    let config = cbindgen::Config::from_file(&config_path)
        .unwrap_or_else(|e| panic!("{}: {e}", config_path.display()));
    let mut builder = cbindgen::Builder::new().with_config(config);
    for source in &existing {
        builder = builder.with_src(source);
    }
    let bindings =
        builder.generate().unwrap_or_else(|e| panic!("cbindgen failed for {}: {e}", header.output));
    let generated = out.join(header.output);
    std::fs::create_dir_all(generated.parent().unwrap()).unwrap();
    bindings.write_to_file(&generated);
    if update {
        let target = root.join("include").join(header.output);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        bindings.write_to_file(&target);
    }
}
