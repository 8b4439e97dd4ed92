//! Outgoing e-mail: the workspace's confirmation and password-reset messages.
//!
//! With `smtp.url` set, messages go out through that SMTP server (`smtp://` plain or with
//! `?tls=required` for STARTTLS, `smtps://` for TLS from the start). Without it, the embedded
//! default, each message is written as an `.eml` file under `smtp.mail_dir` and the file's path
//! is logged, so a newcomer can open it locally. Neither the link nor the address is logged: a
//! link acts for its account (whoever reads the logs could reset a password with it).

use cova_config::SmtpConfig;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncFileTransport, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("smtp.url: {0}")]
    Config(String),
    #[error("`{0}` is not an e-mail address")]
    Address(String),
    #[error("sending the e-mail failed: {0}")]
    Send(String),
}

enum Transport {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    Files { dir: PathBuf, transport: AsyncFileTransport<Tokio1Executor> },
}

/// One message: plain text, one recipient.
#[derive(Debug, Clone)]
pub struct Mail {
    pub to: String,
    pub subject: String,
    pub text: String,
}

pub struct Mailer {
    transport: Transport,
    from: Mailbox,
}

impl Mailer {
    pub fn from_config(cfg: &SmtpConfig) -> Result<Self, MailError> {
        let from: Mailbox = cfg.from.parse().map_err(|_| MailError::Address(cfg.from.clone()))?;
        let transport = if cfg.url.is_empty() {
            let dir = PathBuf::from(&cfg.mail_dir);
            Transport::Files { transport: AsyncFileTransport::new(&dir), dir }
        } else {
            let builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(&cfg.url)
                .map_err(|e| MailError::Config(e.to_string()))?;
            Transport::Smtp(builder.timeout(Some(Duration::from_millis(cfg.timeout_ms))).build())
        };
        Ok(Self { transport, from })
    }

    /// Where messages go, for the start-up line.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Smtp(_) => "smtp".to_owned(),
            Transport::Files { dir, .. } => format!("files in {}", dir.display()),
        }
    }

    pub async fn send(&self, mail: &Mail) -> Result<(), MailError> {
        let to: Mailbox = mail.to.parse().map_err(|_| MailError::Address(mail.to.clone()))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(&mail.subject)
            .header(ContentType::TEXT_PLAIN)
            .body(mail.text.clone())
            .map_err(|e| MailError::Send(e.to_string()))?;
        match &self.transport {
            Transport::Smtp(smtp) => {
                smtp.send(message).await.map_err(|e| MailError::Send(e.to_string()))?;
            }
            Transport::Files { dir, transport } => {
                owner_only_dir(dir).await.map_err(|e| MailError::Send(format!("{}: {e}", dir.display())))?;
                let id = transport.send(message).await.map_err(|e| MailError::Send(e.to_string()))?;
                let file = dir.join(format!("{id}.eml"));
                // Each message holds a live sign-in link: the owner's alone, whatever the umask
                // (the directory already keeps others out between the write and this).
                owner_only_file(&file).await.map_err(|e| MailError::Send(format!("{}: {e}", file.display())))?;
                // No mail server here: the log is how a local user finds the message.
                tracing::info!(
                    subject = %mail.subject,
                    file = %file.display(),
                    "e-mail written to a file (smtp.url is not set)"
                );
            }
        }
        Ok(())
    }
}

/// Creates `dir` if missing and makes it the owner's alone (0700).
async fn owner_only_dir(dir: &std::path::Path) -> std::io::Result<()> {
    tokio::fs::create_dir_all(dir).await?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).await?;
    }
    Ok(())
}

/// Makes `file` the owner's alone (0600).
async fn owner_only_file(file: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).await?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_smtp_messages_become_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = SmtpConfig { mail_dir: dir.path().join("mail").display().to_string(), ..SmtpConfig::default() };
        let mailer = Mailer::from_config(&cfg).expect("mailer");
        assert!(mailer.describe().starts_with("files in "));
        let mail = Mail {
            to: "ana@example.com".into(),
            subject: "Confirm".into(),
            text: "Open http://x/#/confirm/abc".into(),
        };
        mailer.send(&mail).await.expect("sent");
        let files: Vec<_> = std::fs::read_dir(dir.path().join("mail")).expect("dir").flatten().collect();
        assert_eq!(files.len(), 1);
        let body = std::fs::read_to_string(files[0].path()).expect("read");
        assert!(body.contains("To: ana@example.com") && body.contains("#/confirm/abc"), "{body}");
        // A live link: the owner's alone, the directory too.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &std::path::Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
            assert_eq!(mode(&files[0].path()), 0o600);
            assert_eq!(mode(&dir.path().join("mail")), 0o700);
        }
    }

    #[test]
    fn bad_addresses_and_urls_are_refused() {
        let cfg = SmtpConfig { from: "not an address".into(), ..SmtpConfig::default() };
        assert!(matches!(Mailer::from_config(&cfg), Err(MailError::Address(_))));
        let cfg = SmtpConfig { url: "smtp://".into(), ..SmtpConfig::default() };
        assert!(Mailer::from_config(&cfg).is_err());
    }
}
