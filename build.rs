//! Build script: the shared library's SONAME, and (only when asked) the C
//! headers generated from the Rust source with cbindgen: the public headers in
//! `include/`, and the C test suite's constants header (not installed).
//!
//! SONAME: `libamdgpu_dropin.so.<major>`, or `libamdgpu_dropin.so.0.<minor>`
//! while the major version is 0 (cargo-c's convention; the CMake build names
//! the files to match, see cmake/library_names.cmake).
//!
//! Headers: the checked-in headers are what users compile against, so a
//! normal build runs no generator and compiles no cbindgen. With the feature
//! `generate-headers` every build writes freshly generated copies to
//! `$OUT_DIR/headers/`, and the test `tests/headers.rs` fails when they differ
//! from the checked-in ones (`include/`, and
//! `ctest/include/amdgpu_dropin_hostcall_constants.h`). To refresh the
//! checked-in headers after changing the C surface, run:
//!
//!     AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers
//!
//! Which sources each header comes from is listed once, in
//! `codegen/headers.rs` (shared with the drift test). A listed source is
//! found by name below its folder, so moving it into a sub-folder keeps the
//! header generated; a source or configuration that cannot be found stops the
//! build with a message naming it, never skips the header. No `cargo metadata`
//! run: the build stays fast and works offline.

#[cfg(feature = "generate-headers")]
#[path = "codegen/headers.rs"]
mod headers;

#[cfg(feature = "generate-headers")]
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    set_soname();
    #[cfg(feature = "generate-headers")]
    generate_headers();
}

fn set_soname() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap();
    let soversion = if major == "0" { format!("0.{minor}") } else { major };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libamdgpu_dropin.so.{soversion}");
}

#[cfg(feature = "generate-headers")]
fn generate_headers() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("headers");
    // Fresh every run: tests/headers.rs compares the whole directory with the checked-in headers.
    let _ = std::fs::remove_dir_all(&out);
    let update = std::env::var_os("AMDGPU_DROPIN_UPDATE_HEADERS").is_some_and(|v| v == "1");
    println!("cargo:rerun-if-env-changed=AMDGPU_DROPIN_UPDATE_HEADERS");
    for header in headers::HEADERS {
        generate(&root, &out, header, update);
    }
}

#[cfg(feature = "generate-headers")]
fn generate(root: &Path, out: &Path, header: &headers::Header, update: bool) {
    // Rerun when a folder a source is searched in changes (a file moved in or out).
    for source in header.sources {
        println!("cargo:rerun-if-changed={}", root.join(source.under).display());
    }
    let (config_path, sources) = match headers::inputs(root, header) {
        Ok(inputs) => inputs,
        Err(errors) => panic!("cannot generate {}:\n{errors}", header.output),
    };
    println!("cargo:rerun-if-changed={}", config_path.display());
    let config = cbindgen::Config::from_file(&config_path)
        .unwrap_or_else(|e| panic!("{}: {e}", config_path.display()));
    let mut builder = cbindgen::Builder::new().with_config(config);
    for source in &sources {
        println!("cargo:rerun-if-changed={}", source.display());
        builder = builder.with_src(source);
    }
    let bindings =
        builder.generate().unwrap_or_else(|e| panic!("cbindgen failed for {}: {e}", header.output));
    let generated = out.join(header.output);
    std::fs::create_dir_all(generated.parent().unwrap()).unwrap();
    bindings.write_to_file(&generated);
    if update {
        let target = root.join(header.output);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        bindings.write_to_file(&target);
    }
}
