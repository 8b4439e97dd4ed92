//! cova's benchmarks live in `benches/suite.rs` (run with `make bench`); this library is empty.
