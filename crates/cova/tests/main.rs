//! The `cova` binary driven as operators and integrators run it: the CLI, the client, split
//! roles on shared backends, kills. One test binary, one module per area.

mod common;

mod ai_worker;
mod cli;
mod client;
mod kill;
mod mail;
mod notifier;
mod observability;
mod pace;
mod scheduler;
