//! No code: this crate's manifest turns on dependency features (see its `Cargo.toml`), so that
//! `cargo run -p cova` and `cargo test --workspace` compile the shared dependencies once.
