//! Outbound notifications: HTTPS webhooks signed like Stripe's (`X-Signature: t=…,v1=…`) and
//! sent only to public addresses, and Telegram Bot API messages. The gateway uses it to check
//! and test channels, the notifier to deliver.

mod sender;

pub use cova_auth::signature::{EVENT_ID_HEADER, SIGNATURE_HEADER, sign, sign_event, verify, verify_event};
pub use cova_egress::{Guard, Refusal, is_public};
pub use sender::{Outcome, SendError, Sender};
