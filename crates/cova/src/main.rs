//! `cova`: one binary, every role. See `cova --help`.

mod admin;
mod cli;
mod serve;
mod table;

use clap::Parser;
use cova_client::exit::{Exit, exit_code};
use std::process::ExitCode;

fn main() -> ExitCode {
    // Usage errors exit 2 (clap's convention, which the operator contract adopts).
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cova: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => Exit::Success.into(),
        Err(e) => {
            // One line, the whole cause chain, no backtrace: operators grep this.
            eprintln!("cova: {}", format!("{e:#}").replace('\n', " "));
            // 1, or the class of a `cova client` error (cova-client's exit.rs).
            exit_code(&e)
        }
    }
}
