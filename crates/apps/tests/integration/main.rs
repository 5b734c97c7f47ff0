//! The crate's integration tests as one test binary: one link and one
//! instantiation of the crates' generics instead of one per file, which is
//! most of what building the suite cost. Each module is one subject; run one
//! with `cargo test -p psp-apps --test integration MODULE::`.

mod green;
mod kv;
mod runtime;
