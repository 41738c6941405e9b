//! The checked-in headers (include/, and the C suite's constants header in
//! ctest/include/) must equal what cbindgen generates from
//! the current source (build.rs writes fresh copies to $OUT_DIR/headers).
//! Refresh with: AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build

use std::path::Path;

fn check(relative: &str) {
    let generated = Path::new(env!("OUT_DIR")).join("headers").join(relative);
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("include").join(relative);
    let generated = std::fs::read_to_string(&generated)
        .unwrap_or_else(|e| panic!("{} was not generated: {e}", generated.display()));
    let checked_in = std::fs::read_to_string(&checked_in)
        .unwrap_or_else(|e| panic!("{} is missing: {e}", checked_in.display()));
    assert!(
        generated == checked_in,
        "include/{relative} differs from the generated header; \
         run `AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build` and commit the result"
    );
}

#[test]
fn vmem_header_matches_source() {
    check("iree/hal/drivers/amdgpu/util/vmem.h");
}

#[test]
fn rochostcall_header_matches_source() {
    check("rochostcall.hpp");
}

#[test]
fn test_constants_header_matches_source() {
    check("../ctest/include/amdgpu_dropin_hostcall_constants.h");
}
