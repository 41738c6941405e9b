//! The checked-in headers in include/ must equal what cbindgen generates from
//! the current source. build.rs writes fresh copies to $OUT_DIR/headers only
//! with the feature `generate-headers` (consumers never compile cbindgen), so
//! the check runs with: cargo test --features generate-headers --test headers
//! Refresh with: AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers

#[cfg(feature = "generate-headers")]
fn check(relative: &str) {
    use std::path::Path;
    let generated = Path::new(env!("OUT_DIR")).join("headers").join(relative);
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("include").join(relative);
    let generated = std::fs::read_to_string(&generated)
        .unwrap_or_else(|e| panic!("{} was not generated: {e}", generated.display()));
    let checked_in = std::fs::read_to_string(&checked_in)
        .unwrap_or_else(|e| panic!("{} is missing: {e}", checked_in.display()));
    assert!(
        generated == checked_in,
        "include/{relative} differs from the generated header; run \
         `AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers` and commit the result"
    );
}

#[cfg(not(feature = "generate-headers"))]
fn check(_relative: &str) {
    unreachable!("ignored without the generate-headers feature");
}

#[test]
#[cfg_attr(not(feature = "generate-headers"), ignore = "needs --features generate-headers")]
fn vmem_header_matches_source() {
    check("iree-vmem/iree/hal/drivers/amdgpu/util/vmem.h");
}

#[test]
#[cfg_attr(not(feature = "generate-headers"), ignore = "needs --features generate-headers")]
fn rochostcall_header_matches_source() {
    check("rochostcall.hpp");
}
