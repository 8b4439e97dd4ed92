//! What the workspace sells (`billing.*`) and the payment provider that sells it (`payments.*`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BillingConfig {
    /// Comments granted once per account at signup, spendable only from the workspace.
    pub free_allowance: i64,
    /// The packs the workspace sells, in the order it shows them.
    pub packs: Vec<PackConfig>,
}

impl Default for BillingConfig {
    fn default() -> Self {
        let pack = |id: &str, comments, amount| PackConfig { id: id.into(), comments, amount, currency: "usd".into() };
        Self {
            free_allowance: 500,
            packs: vec![pack("2k", 2_000, 900), pack("10k", 10_000, 3_900), pack("50k", 50_000, 14_900)],
        }
    }
}

impl BillingConfig {
    pub fn pack(&self, id: &str) -> Option<&PackConfig> {
        self.packs.iter().find(|p| p.id == id)
    }
}

/// One pack of the catalogue: `comments` for `amount` in the currency's smallest unit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PackConfig {
    pub id: String,
    pub comments: i64,
    pub amount: i64,
    pub currency: String,
}

/// The payment provider (a Stripe-compatible API) that sells packs.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PaymentsConfig {
    pub api_base_url: String,
    #[serde(skip_serializing)]
    pub secret_key: Option<secrecy::SecretString>,
    #[serde(skip_serializing)]
    pub webhook_secret: Option<secrecy::SecretString>,
    /// How old a webhook's signed timestamp may be.
    pub webhook_tolerance_s: u64,
    pub timeout_ms: u64,
}

impl Default for PaymentsConfig {
    fn default() -> Self {
        Self {
            api_base_url: "https://api.stripe.com".into(),
            secret_key: None,
            webhook_secret: None,
            webhook_tolerance_s: 300,
            timeout_ms: 10_000,
        }
    }
}

impl std::fmt::Debug for PaymentsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaymentsConfig")
            .field("api_base_url", &self.api_base_url)
            .field("secret_key", &self.secret_key.as_ref().map(|_| "***"))
            .field("webhook_secret", &self.webhook_secret.as_ref().map(|_| "***"))
            .field("webhook_tolerance_s", &self.webhook_tolerance_s)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}
