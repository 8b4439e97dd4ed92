use crate::{admin, serve};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use cova_app::Role;
use cova_client as client;
use cova_config::Config;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "cova", version, about = "Collects and analyses the comments of short-video posts.")]
pub struct Cli {
    /// TOML configuration file (defaults, then this file, then COVA_* environment variables).
    /// Given before the command (`cova --config FILE serve`); `cova client` reads none, so its
    /// help does not offer it.
    #[arg(long, env = "COVA_CONFIG", value_name = "FILE")]
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
    /// Operator commands: accounts, packs, tokens, usage, jobs.
    Admin(AdminArgs),
    /// The configuration: check it against the backends, or print it (secrets masked).
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Integrator commands over a cova service's HTTP API: analyze, metadata, usage, library, AI.
    ///
    /// Reads no server configuration. The service is --url, else COVA_URL, else `url` in the
    /// client config file ($XDG_CONFIG_HOME/cova/client.toml, else ~/.config/cova/client.toml),
    /// else http://127.0.0.1:8080. The token is read from COVA_TOKEN, else from `token` in that
    /// file; never from the command line, where other users could see it.
    ///
    /// Exit codes: 0 success, 1 other error, 2 usage, 3 authentication or permission, 4 bad
    /// input or not found, 5 balance or quota, 6 the job failed, 7 service unavailable or
    /// unreachable. Errors are one line on stderr: `cova: <detail> (<code>)`.
    Client(client::ClientArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validates the configuration and probes the database, cache and queue it names; exits 1
    /// when something is wrong, saying what.
    Check,
    /// Prints the effective configuration (defaults, file, environment) as TOML, with URL
    /// passwords and secrets masked.
    Print,
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
    /// An account's balance this month and its running jobs.
    Usage {
        /// The account's e-mail.
        #[arg(long)]
        email: String,
    },
    /// Jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// The keys that seal stored secrets (webhook secrets, Telegram chat ids).
    #[command(subcommand)]
    Secrets(SecretsCommand),
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Prints a new random key for `database.encryption_keys`.
    NewKey,
    /// Seals again, with the first key of `database.encryption_keys`, every stored secret
    /// sealed with another key (after putting a new key first), so the old key can be dropped.
    Reseal,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Everything known about one job: owner, status, timings, comments, charge, failure.
    Show {
        /// The job id (as returned by POST /api/v1/analyze).
        id: String,
    },
    /// Issues again the command of every queued or running job (after a database restore
    /// whose commands are gone from the broker); a job still in the broker is delivered twice,
    /// which is harmless.
    Requeue {
        /// Only jobs created at least this many seconds ago.
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(i64).range(0..))]
        older_than_s: i64,
        /// List the jobs without issuing anything.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// Creates an account with a confirmed e-mail.
    Create {
        /// The account's e-mail (its login and its identity in every other admin command).
        #[arg(long)]
        email: String,
    },
    /// Lists accounts, oldest first, with this month's balance.
    List {
        /// How many to show.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        limit: i64,
        /// How many to skip (for paging).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
        offset: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum PacksCommand {
    /// Adds comments to the account's balance for the current month.
    Grant {
        /// The account's e-mail.
        #[arg(long)]
        email: String,
        /// How many comments to add (1 to 100,000,000); they expire at the end of the month (UTC).
        #[arg(long, value_parser = clap::value_parser!(i64).range(1..=100_000_000))]
        comments: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Creates a token; the token alone is the last line of stdout, shown only this once.
    Create {
        /// The account's e-mail.
        #[arg(long)]
        email: String,
        /// Comma-separated: metadata:read, analyze:write, library:write, ai:write, keywords:write.
        #[arg(long, value_parser = parse_scopes)]
        scopes: cova_auth::ScopeSet,
        /// A label to recognise the token by (default: `token <prefix>`).
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Lists the account's tokens (prefixes only).
    List {
        /// The account's e-mail.
        #[arg(long)]
        email: String,
    },
    /// Revokes the account's token with this display prefix.
    Revoke {
        /// The account's e-mail.
        #[arg(long)]
        email: String,
        /// The token's display prefix, as `tokens list` shows it.
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
    let command = match cli.command {
        // The client talks to a service over HTTP: no server configuration, no telemetry.
        Command::Client(args) => return Ok(client::run(args).await?),
        command => command,
    };
    let config = Config::load(cli.config.as_deref()).context("loading the configuration")?;
    match command {
        Command::Serve => serve::run(config, &Role::ALL).await,
        Command::Gateway => serve::run(config, &[Role::Gateway]).await,
        Command::Scraper => serve::run(config, &[Role::Scraper]).await,
        Command::Scheduler => serve::run(config, &[Role::Scheduler]).await,
        Command::Notifier => serve::run(config, &[Role::Notifier]).await,
        Command::AiWorker => serve::run(config, &[Role::AiWorker]).await,
        Command::Migrate => serve::migrate(config).await,
        Command::Admin(args) => admin::run(config, args.command).await,
        Command::Config(ConfigCommand::Print) => {
            print!("{}", config.to_redacted_toml());
            Ok(())
        }
        Command::Config(ConfigCommand::Check) => serve::check(config).await,
        // Handled above, before any configuration is read.
        Command::Client(args) => Ok(client::run(args).await?),
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

    #[test]
    fn client_options_go_anywhere_and_the_token_is_no_flag() {
        let cli = Cli::try_parse_from(["cova", "client", "analyze", "https://x", "--wait", "--url", "http://h:1"])
            .expect("global --url after the subcommand");
        let Command::Client(args) = cli.command else { panic!("client") };
        assert_eq!(args.url.as_deref(), Some("http://h:1"));
        assert_eq!(args.timeout, 30);
        let err = Cli::try_parse_from(["cova", "client", "--token", "cova_x", "usage"]).expect_err("no --token");
        assert_eq!(err.exit_code(), 2);
        let err = Cli::try_parse_from(["cova", "client", "usage", "--timeout", "0"]).expect_err("timeout >= 1");
        assert_eq!(err.exit_code(), 2);
        let err =
            Cli::try_parse_from(["cova", "client", "analyze", "https://x", "--format", "xml"]).expect_err("format");
        assert_eq!(err.exit_code(), 2);
    }
}
