//! The checked-in headers (include/, and the C suite's constants header in
//! ctest/include/) must equal what cbindgen generates from the current source:
//! every header build.rs generates is checked in, every header in include/ is
//! generated, and their bytes are the same. build.rs
//! writes fresh copies to $OUT_DIR/headers only with the feature
//! `generate-headers` (consumers never compile cbindgen), so the check runs
//! with: cargo test --features generate-headers --test headers
//! Refresh with: AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers

#[cfg(feature = "generate-headers")]
mod drift {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// Header files below `root`, as paths relative to it.
    fn headers_below(root: &Path) -> BTreeSet<PathBuf> {
        fn walk(root: &Path, dir: &Path, found: &mut BTreeSet<PathBuf>) {
            let entries =
                std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
            for entry in entries {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(root, &path, found);
                } else if matches!(path.extension().and_then(|e| e.to_str()), Some("h" | "hpp")) {
                    found.insert(path.strip_prefix(root).unwrap().to_path_buf());
                }
            }
        }
        let mut found = BTreeSet::new();
        walk(root, root, &mut found);
        found
    }

    pub fn check_all() {
        // Generated copies sit at the same paths, relative to the crate root.
        let generated_root = Path::new(env!("OUT_DIR")).join("headers");
        let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let generated = headers_below(&generated_root);
        assert!(!generated.is_empty(), "build.rs generated no header");
        let installed: BTreeSet<PathBuf> = headers_below(&crate_root.join("include"))
            .into_iter()
            .map(|p| Path::new("include").join(p))
            .collect();
        let generated_installed: BTreeSet<PathBuf> =
            generated.iter().filter(|p| p.starts_with("include")).cloned().collect();
        assert_eq!(
            generated_installed, installed,
            "the generated headers (left) and the headers in include/ (right) differ"
        );
        for relative in &generated {
            let fresh = std::fs::read_to_string(generated_root.join(relative)).unwrap();
            let kept = std::fs::read_to_string(crate_root.join(relative))
                .unwrap_or_else(|e| panic!("{} is not checked in: {e}", relative.display()));
            assert!(
                fresh == kept,
                "{} differs from the generated header; run \
                 `AMDGPU_DROPIN_UPDATE_HEADERS=1 cargo build --features generate-headers` and commit the result",
                relative.display()
            );
        }
    }
}

#[test]
#[cfg_attr(not(feature = "generate-headers"), ignore = "needs --features generate-headers")]
fn every_header_matches_source() {
    #[cfg(feature = "generate-headers")]
    drift::check_all();
}
