//! The crate's integration tests as one test binary: one link and one
//! instantiation of the crates' generics instead of one per file, which is
//! most of what building the suite cost. Each module is one subject; run one
//! with `cargo test -p psp-cli --test integration MODULE::`.

mod apps;
mod cli;
mod closed_loop;
mod common;
mod doc_commands;
mod doc_links;
mod measured;
mod memcache;
mod redis;
mod reproduce;
mod run_series;
mod saved_results;
mod server_profile;
mod synergy_run;
mod testbed;
mod top;
mod validation;
mod xdp;
