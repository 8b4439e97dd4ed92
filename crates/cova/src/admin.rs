//! `cova admin …`: the operator contract (exit 0 ok, 1 failure with one line on stderr, 2 usage).

use crate::cli::{AccountsCommand, AdminCommand, PacksCommand, TokensCommand};
use anyhow::{Context, anyhow, bail};
use cova_config::{Config, DatabaseBackend};
use cova_domain::time::{now_ms, rfc3339};
use cova_storage::repo::tokens::{NewToken, TokenRefusal};
use cova_storage::repo::{accounts, balances, tokens};
use cova_storage::{Account, Db, StorageError};

pub async fn run(config: Config, command: AdminCommand) -> anyhow::Result<()> {
    let db = Db::connect(&config.database).context("opening the database")?;
    // The embedded database is created on first use, so `admin` works before the first `serve`.
    if matches!(DatabaseBackend::parse(&config.database.url), Ok(DatabaseBackend::Sqlite(_))) {
        db.migrate().await.context("preparing the embedded database")?;
    }
    let now = now_ms();
    match command {
        AdminCommand::Accounts(AccountsCommand::Create { email }) => {
            let account =
                accounts::create(&db, &email, true, config.billing.free_allowance, now).await.map_err(explain)?;
            println!("created account {} <{}>", account.id, account.email);
        }
        AdminCommand::Packs(PacksCommand::Grant { email, comments }) => {
            let account = account(&db, &email).await?;
            let b = balances::grant(&db, &account.id, comments, "admin grant", now).await.map_err(explain)?;
            println!(
                "granted {comments} comments to {}; {}: {} available of {} (expires {})",
                account.email,
                b.month,
                b.available,
                b.granted,
                rfc3339(b.expires_at)
            );
        }
        AdminCommand::Tokens(TokensCommand::Create { email, scopes, name }) => {
            let account = account(&db, &email).await?;
            let generated = cova_auth::generate();
            let name = if name.is_empty() { format!("token {}", &generated.prefix) } else { name };
            let created =
                tokens::create(&db, NewToken { account_id: &account.id, name: &name, scopes, token: &generated }, now)
                    .await
                    .map_err(explain)?;
            match created {
                Ok(record) => {
                    eprintln!("The token is shown only this once; store it now.");
                    println!("created token {} \"{}\" scopes {}", record.prefix, record.name, record.scopes);
                    println!("{}", generated.value);
                }
                Err(TokenRefusal::Limit) => bail!(
                    "{} already has {} active tokens; revoke one first (cova admin tokens revoke)",
                    account.email,
                    tokens::MAX_ACTIVE_TOKENS
                ),
                Err(TokenRefusal::EmailUnconfirmed) => bail!("{} has not confirmed its e-mail", account.email),
            }
        }
        AdminCommand::Tokens(TokensCommand::List { email }) => {
            let account = account(&db, &email).await?;
            println!("{:<14} {:<8} {:<24} {:<21} {:<21} NAME", "PREFIX", "STATUS", "SCOPES", "CREATED", "LAST USED");
            for t in tokens::list(&db, &account.id).await.map_err(explain)? {
                println!(
                    "{:<14} {:<8} {:<24} {:<21} {:<21} {}",
                    t.prefix,
                    if t.revoked_at.is_some() { "revoked" } else { "active" },
                    t.scopes,
                    rfc3339(t.created_at),
                    t.last_used_at.map_or_else(|| "never".into(), rfc3339),
                    t.name
                );
            }
        }
        AdminCommand::Tokens(TokensCommand::Revoke { email, prefix }) => {
            let account = account(&db, &email).await?;
            match tokens::revoke_by_prefix(&db, &account.id, prefix.trim(), now).await.map_err(explain)? {
                0 => bail!("no active token with prefix {prefix} for {}", account.email),
                n => println!("revoked {n} token(s) with prefix {prefix}"),
            }
        }
    }
    Ok(())
}

async fn account(db: &Db, email: &str) -> anyhow::Result<Account> {
    accounts::find_by_email(db, email).await.map_err(explain)?.ok_or_else(|| anyhow!("no account with e-mail {email}"))
}

/// Storage errors as one line an operator can act on.
fn explain(e: StorageError) -> anyhow::Error {
    match e {
        StorageError::Conflict(msg) => anyhow!(msg),
        StorageError::Unavailable(msg) => anyhow!("the database is unavailable: {msg}"),
        StorageError::Database(msg) if msg.contains("does not exist") || msg.contains("no such table") => {
            anyhow!("the database schema is missing or old; run `cova migrate` ({msg})")
        }
        other => anyhow!(other),
    }
}
