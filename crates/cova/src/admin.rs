//! `cova admin …`: the operator contract (exit 0 ok, 1 failure with one line on stderr, 2 usage).

use crate::cli::{AccountsCommand, AdminCommand, JobsCommand, PacksCommand, SecretsCommand, TokensCommand};
use crate::table::Table;
use anyhow::{Context, anyhow, bail};
use cova_config::{Config, DatabaseBackend};
use cova_domain::time::{now_ms, rfc3339};
use cova_storage::repo::tokens::{NewToken, TokenRefusal};
use cova_storage::repo::{accounts, balances, jobs, tokens};
use cova_storage::{Account, Db, StorageError};

pub async fn run(config: Config, command: AdminCommand) -> anyhow::Result<()> {
    // A new key is only printed: nothing is opened, made or written for it.
    if let AdminCommand::Secrets(SecretsCommand::NewKey) = command {
        println!("{}", cova_auth::sealing::Keyring::generate_key());
        return Ok(());
    }
    let db = Db::connect(&config.database).context("opening the database")?;
    // Grants and token changes show at once in the quota headers and `/usage` of the gateways.
    cova_runtime::Backends::refresh_shared_snapshots(&db, &config).context("connecting the cache")?;
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
        AdminCommand::Accounts(AccountsCommand::List { limit, offset }) => {
            let mut table = Table::new(["EMAIL", "ID", "CONFIRMED", "TOKENS", "AVAILABLE", "GRANTED", "CREATED"]);
            for a in accounts::list(&db, limit, offset).await.map_err(explain)? {
                let b = balances::current(&db, &a.id, now).await.map_err(explain)?;
                table.row([
                    a.email.clone(),
                    a.id.clone(),
                    if a.is_confirmed() { "yes" } else { "no" }.to_owned(),
                    a.active_tokens.to_string(),
                    b.available.to_string(),
                    b.granted.to_string(),
                    rfc3339(a.created_at),
                ]);
            }
            print!("{table}");
        }
        AdminCommand::Usage { email } => {
            let account = account(&db, &email).await?;
            let b = balances::current(&db, &account.id, now).await.map_err(explain)?;
            let running = jobs::count_running(&db, &account.id).await.map_err(explain)?;
            let mut table = Table::new(["", ""]);
            table.row(["account".to_owned(), format!("{} ({})", account.email, account.id)]);
            table.row(["month".to_owned(), b.month.clone()]);
            table.row(["granted".to_owned(), b.granted.to_string()]);
            table.row(["spent".to_owned(), b.spent.to_string()]);
            table.row(["held by running jobs".to_owned(), b.reserved.to_string()]);
            table.row(["available".to_owned(), b.available.to_string()]);
            table.row(["expires".to_owned(), rfc3339(b.expires_at)]);
            table.row(["running jobs".to_owned(), running.to_string()]);
            table.row(["free allowance left".to_owned(), account.free_comments_left.to_string()]);
            print!("{}", table.without_header());
        }
        AdminCommand::Jobs(JobsCommand::Show { id }) => {
            let job = jobs::get(&db, id.trim()).await.map_err(explain)?.ok_or_else(|| anyhow!("no job {id}"))?;
            let owner = accounts::get(&db, &job.account_id).await.map_err(explain)?;
            let hold = balances::reservation(&db, &job.id).await.map_err(explain)?;
            let at = |t: Option<i64>| t.map_or_else(|| "-".to_owned(), rfc3339);
            let mut table = Table::new(["", ""]);
            table.row(["job".to_owned(), job.id.clone()]);
            table.row(["kind".to_owned(), job.kind.to_string()]);
            table.row(["account".to_owned(), format!("{} ({})", owner.email, owner.id)]);
            table.row([
                "started by".to_owned(),
                job.token_id.clone().map_or("a session or a watch".to_owned(), |t| format!("token {t}")),
            ]);
            table.row(["post".to_owned(), format!("{} ({})", job.r#ref, job.url)]);
            table.row(["status".to_owned(), job.status.as_str().to_owned()]);
            table.row(["created".to_owned(), rfc3339(job.created_at)]);
            table.row(["started".to_owned(), at(job.started_at)]);
            table.row(["finished".to_owned(), at(job.finished_at)]);
            let expected = job.comments_expected.map_or_else(String::new, |n| format!(" of {n} expected"));
            table.row(["comments".to_owned(), format!("{}{expected}", job.comments_collected)]);
            table.row(["truncated".to_owned(), job.truncated.to_string()]);
            if let Some(r) = hold {
                table.row(["hold".to_owned(), format!("{} comments, {}, {} charged", r.amount, r.state, r.charged)]);
            }
            if let Some(code) = &job.error_code {
                table.row(["error".to_owned(), format!("{code}: {}", job.error_detail.clone().unwrap_or_default())]);
            }
            print!("{}", table.without_header());
        }
        AdminCommand::Jobs(JobsCommand::Requeue { older_than_s, dry_run }) => {
            let jobs = jobs::reissue_unfinished(&db, older_than_s.saturating_mul(1000), dry_run, now)
                .await
                .map_err(explain)?;
            let mut table = Table::new(["JOB", "KIND", "STATUS", "CREATED", "POST"]);
            for job in &jobs {
                table.row([
                    job.id.clone(),
                    job.kind.to_string(),
                    job.status.as_str().to_owned(),
                    rfc3339(job.created_at),
                    job.r#ref.clone(),
                ]);
            }
            if !jobs.is_empty() {
                print!("{table}");
            }
            let verb = if dry_run { "would re-issue" } else { "re-issued" };
            println!("{verb} {} job(s) queued or running for at least {older_than_s} s", jobs.len());
        }
        AdminCommand::Secrets(SecretsCommand::Reseal) => {
            let n = cova_storage::repo::channels::reseal_all(&db).await.map_err(explain)?;
            println!("sealed {n} account(s)' channels again with key {}", db.sealing_key_id().unwrap_or("-"));
        }
        AdminCommand::Secrets(SecretsCommand::NewKey) => unreachable!("printed before the database is opened"),
        AdminCommand::Tokens(TokensCommand::List { email }) => {
            let account = account(&db, &email).await?;
            let mut table = Table::new(["PREFIX", "STATUS", "SCOPES", "CREATED", "LAST USED", "NAME"]);
            for t in tokens::list(&db, &account.id).await.map_err(explain)? {
                table.row([
                    t.prefix.clone(),
                    if t.revoked_at.is_some() { "revoked" } else { "active" }.to_owned(),
                    t.scopes.to_string(),
                    rfc3339(t.created_at),
                    t.last_used_at.map_or_else(|| "never".into(), rfc3339),
                    t.name.clone(),
                ]);
            }
            print!("{table}");
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
