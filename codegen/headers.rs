//! The generated C headers and the Rust sources each one is generated from:
//! the one list, read by `build.rs` (which runs cbindgen) and by
//! `tests/headers.rs` (the drift test and the checks of this list).
//!
//! A source is named by its file name and the folder it lives somewhere
//! below, not by a full path, so that moving a module into a sub-folder (or
//! turning `x.rs` into `x/mod.rs`) keeps its header generated. A name that
//! matches no file, or more than one, is an error that stops the build: a
//! header is never skipped, so the drift test always covers every header.
//! When a listed module is renamed or split, update [`HEADERS`].
//!
//! This file uses only `std`: the drift test includes it too.

use std::path::{Path, PathBuf};

/// A Rust source of a header: the file `name` (`x.rs`, or `x/mod.rs`)
/// anywhere below the folder `under`, both relative to the crate root.
pub struct Source {
    pub under: &'static str,
    pub name: &'static str,
}

pub struct Header {
    /// cbindgen configuration, relative to the crate root.
    pub config: &'static str,
    /// Rust sources that hold the header's C surface.
    pub sources: &'static [Source],
    /// Path of the checked-in header, relative to the crate root.
    pub output: &'static str,
}

const fn src(under: &'static str, name: &'static str) -> Source {
    Source { under, name }
}

/// Every header cbindgen generates. `tests/headers.rs` checks that each one is
/// checked in unchanged, and that every header in `include/` is listed here.
pub const HEADERS: &[Header] = &[
    Header {
        config: "cbindgen.toml",
        sources: &[src("src/vmem", "abi.rs"), src("src/ffi", "vmem.rs")],
        output: "include/iree-vmem/iree/hal/drivers/amdgpu/util/vmem.h",
    },
    Header {
        config: "cbindgen-hostcall.toml",
        sources: &[src("src/ffi", "hostcall.rs")],
        output: "include/rochostcall.hpp",
    },
    Header {
        config: "cbindgen-hostcall-ext.toml",
        sources: &[
            src("hostcall-core/src/protocol", "host_packet.rs"),
            src("src/hostcall/protocol", "host_packet.rs"),
            src("src/ffi", "hostcall_ext.rs"),
            src("src/ffi", "hostcall_protocol.rs"),
            src("src/ffi", "hostcall_counters.rs"),
            src("src/hostcall", "counters.rs"),
        ],
        output: "include/amdgpu_dropin_hostcall.h",
    },
    // Test-suite only (not installed): constants the C tests share with the library.
    Header {
        config: "cbindgen-test-constants.toml",
        sources: &[src("src/hostcall", "tunables.rs"), src("src/hostcall", "test_hooks.rs")],
        output: "ctest/include/amdgpu_dropin_hostcall_constants.h",
    },
];

/// Finds `source` below `root`: exactly one file `under/**/name`, or
/// `under/**/stem/mod.rs`. Anything else is an error that says what to fix.
pub fn resolve(root: &Path, source: &Source, output: &str) -> Result<PathBuf, String> {
    let under = root.join(source.under);
    let stem = source.name.strip_suffix(".rs").unwrap_or(source.name);
    let mut found = Vec::new();
    walk(&under, &mut |path: &Path| {
        let name = path.file_name().and_then(|n| n.to_str());
        let parent = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str());
        if name == Some(source.name) || (name == Some("mod.rs") && parent == Some(stem)) {
            found.push(path.to_path_buf());
        }
    })
    .map_err(|e| format!("{}: cannot read {}: {e}", output, under.display()))?;
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!(
            "{output}: no source `{}` below `{}` (was it renamed, or moved out of that folder?); \
             update the header's sources in codegen/headers.rs",
            source.name, source.under
        )),
        _ => Err(format!(
            "{output}: the source `{}` below `{}` is ambiguous ({}); \
             name it by a narrower folder in codegen/headers.rs",
            source.name,
            source.under,
            found.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The configuration and the resolved sources of `header`, or every error found.
pub fn inputs(root: &Path, header: &Header) -> Result<(PathBuf, Vec<PathBuf>), String> {
    let config = root.join(header.config);
    let mut errors = Vec::new();
    if !config.is_file() {
        errors.push(format!("{}: its cbindgen configuration {} is missing", header.output, header.config));
    }
    let mut sources = Vec::new();
    for source in header.sources {
        match resolve(root, source, header.output) {
            Ok(path) => sources.push(path),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok((config, sources))
    } else {
        Err(errors.join("\n"))
    }
}

fn walk(dir: &Path, visit: &mut dyn FnMut(&Path)) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, visit)?;
        } else {
            visit(&path);
        }
    }
    Ok(())
}
