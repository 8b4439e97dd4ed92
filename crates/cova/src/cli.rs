use crate::{admin, serve};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use cova_app::Role;
use cova_config::Config;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "cova", version, about = "Collects and analyses the comments of short-video posts.")]
pub struct Cli {
    /// TOML configuration file (defaults, then this file, then COVA_* environment variables).
    #[arg(long, global = true, env = "COVA_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every role in one process (the embedded default: SQLite, in-process queue, in-memory cache).
    Serve,
    /// Only the HTTP gateway (needs a shared queue: amqp://).
    Gateway,
    /// Only the scraper worker: collects comments for analyze jobs (needs amqp://).
    Scraper,
    /// Only the scheduler: starts due watch runs and purges expired breakdowns (needs amqp://).
    Scheduler,
    /// Only the notifier: keyword alerts and deliveries to Telegram and webhooks (needs amqp://).
    Notifier,
    /// Only the ai-worker: runs AI jobs on collected comments (needs amqp://).
    AiWorker,
    /// Creates or upgrades the database schema; safe to run again.
    Migrate,
    /// Operator commands: accounts, packs, tokens.
    Admin(AdminArgs),
}

#[derive(Debug, Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Accounts.
    #[command(subcommand)]
    Accounts(AccountsCommand),
    /// Comment packs.
    #[command(subcommand)]
    Packs(PacksCommand),
    /// API tokens.
    #[command(subcommand)]
    Tokens(TokensCommand),
}

#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// Creates an account with a confirmed e-mail.
    Create {
        #[arg(long)]
        email: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PacksCommand {
    /// Adds comments to the account's balance for the current month.
    Grant {
        #[arg(long)]
        email: String,
        #[arg(long, value_parser = clap::value_parser!(i64).range(1..=100_000_000))]
        comments: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Creates a token; the token alone is the last line of stdout, shown only this once.
    Create {
        #[arg(long)]
        email: String,
        /// Comma-separated: metadata:read, analyze:write, library:write, ai:write, keywords:write.
        #[arg(long, value_parser = parse_scopes)]
        scopes: cova_auth::ScopeSet,
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Lists the account's tokens (prefixes only).
    List {
        #[arg(long)]
        email: String,
    },
    /// Revokes the account's token with this display prefix.
    Revoke {
        #[arg(long)]
        email: String,
        #[arg(long)]
        prefix: String,
    },
}

fn parse_scopes(raw: &str) -> Result<cova_auth::ScopeSet, String> {
    let set = cova_auth::ScopeSet::parse_list(raw).map_err(|e| e.to_string())?;
    if set.is_empty() {
        return Err("at least one scope is required".into());
    }
    Ok(set)
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::load(cli.config.as_deref()).context("loading the configuration")?;
    match cli.command {
        Command::Serve => serve::run(config, &Role::ALL).await,
        Command::Gateway => serve::run(config, &[Role::Gateway]).await,
        Command::Scraper => serve::run(config, &[Role::Scraper]).await,
        Command::Scheduler => serve::run(config, &[Role::Scheduler]).await,
        Command::Notifier => serve::run(config, &[Role::Notifier]).await,
        Command::AiWorker => serve::run(config, &[Role::AiWorker]).await,
        Command::Migrate => serve::migrate(config).await,
        Command::Admin(args) => admin::run(config, args.command).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn usage_errors_exit_2() {
        let err = Cli::try_parse_from(["cova", "admin", "tokens", "create", "--email", "a@b.co", "--scopes", "nope"])
            .expect_err("bad scope");
        assert_eq!(err.exit_code(), 2);
        let err =
            Cli::try_parse_from(["cova", "admin", "packs", "grant", "--email", "a@b.co"]).expect_err("missing flag");
        assert_eq!(err.exit_code(), 2);
    }
}
