//! The crate's integration tests as one test binary: one link and one
//! instantiation of the crates' generics instead of one per file, which was
//! most of what building the suite cost. Each module is one subject; run one
//! with `cargo test -p psp-runtime --test integration MODULE::`. Tests that
//! time a running server are in the `timing` binary instead.

#[path = "../common/mod.rs"]
mod common;
mod decisions;
mod green;
mod hardening;
mod inline;
mod max_wait;
mod steal;
