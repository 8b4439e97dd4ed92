//! Sealing the secrets cova must read back (a webhook's signing secret, a Telegram chat id)
//! before they are stored: AES-256-GCM under a key from the configuration, so that a dump of
//! the database alone cannot sign events as cova or name an account's chat.
//!
//! A [`Keyring`] holds the current key (which seals) and older ones (which only open), so a key
//! is rotated by putting a new one first, re-sealing what is stored, then dropping the old one.
//! A sealed value is `cova:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`; the key id is the
//! first 8 hex digits of the key's SHA-256, so operators configure keys alone. The value is bound
//! to where it is stored (`context`: the column and the row), so it cannot be moved to another
//! account's row and opened there.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

const PREFIX: &str = "cova:v1:";
/// Bytes of a key: AES-256.
pub const KEY_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("an encryption key must be 32 bytes in base64 (e.g. `openssl rand -base64 32`); key {0} is not")]
    BadKey(usize),
    #[error("no encryption key is configured")]
    NoKey,
    #[error("the value was sealed with key {0}, which is not configured")]
    UnknownKey(String),
    #[error("the sealed value is damaged or was sealed for another place")]
    Damaged,
}

struct Key {
    id: String,
    key: LessSafeKey,
}

/// The keys values are sealed and opened with: the first seals, every one opens.
pub struct Keyring {
    keys: Vec<Key>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("Keyring").field("key_ids", &ids).finish()
    }
}

impl Keyring {
    /// Keys as base64 (standard or URL-safe, padded or not), separated by commas or
    /// whitespace, the current one first.
    pub fn parse(list: &str) -> Result<Self, SealError> {
        let keys = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|k| !k.is_empty())
            .enumerate()
            .map(|(i, text)| {
                let bytes = decode_key(text).ok_or(SealError::BadKey(i + 1))?;
                Key::new(&bytes).ok_or(SealError::BadKey(i + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { keys })
    }

    /// A new random key, as [`Keyring::parse`] reads it.
    pub fn generate_key() -> String {
        let mut bytes = [0u8; KEY_LEN];
        // The system's generator does not fail on the platforms cova runs on; a zero key would
        // be refused below rather than used.
        let _ = SystemRandom::new().fill(&mut bytes);
        STANDARD.encode(bytes)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The id of the key that seals (for logs: which key is in use).
    pub fn current_id(&self) -> Option<&str> {
        self.keys.first().map(|k| k.id.as_str())
    }

    /// Seals `plaintext` for `context` (where it is stored) under the current key.
    pub fn seal(&self, plaintext: &str, context: &str) -> Result<String, SealError> {
        let key = self.keys.first().ok_or(SealError::NoKey)?;
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| SealError::NoKey)?;
        let mut data = plaintext.as_bytes().to_vec();
        key.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(context.as_bytes()), &mut data)
            .map_err(|_| SealError::Damaged)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!("{PREFIX}{}:{}", key.id, URL_SAFE_NO_PAD.encode(out)))
    }

    /// Opens a value stored for `context`. A value stored before sealing existed (no prefix)
    /// is returned as it is, so that existing rows keep working until they are re-sealed.
    pub fn open(&self, stored: &str, context: &str) -> Result<String, SealError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else { return Ok(stored.to_owned()) };
        let (id, body) = rest.split_once(':').ok_or(SealError::Damaged)?;
        let key = self.keys.iter().find(|k| k.id == id).ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|_| SealError::Damaged)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Damaged);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Damaged)?;
        let mut data = sealed.to_vec();
        let plain =
            key.key.open_in_place(nonce, Aad::from(context.as_bytes()), &mut data).map_err(|_| SealError::Damaged)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SealError::Damaged)
    }

    /// Whether `stored` is sealed with the current key (otherwise re-sealing rewrites it).
    pub fn is_current(&self, stored: &str) -> bool {
        self.current_id()
            .is_some_and(|id| stored.strip_prefix(PREFIX).and_then(|r| r.split_once(':')).is_some_and(|(k, _)| k == id))
    }
}

impl Key {
    fn new(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != KEY_LEN || bytes.iter().all(|b| *b == 0) {
            return None;
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
        let id = hex::encode(&digest.as_ref()[..4]);
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, bytes).ok()?);
        Some(Self { id, key })
    }
}

fn decode_key(text: &str) -> Option<Vec<u8>> {
    let trimmed = text.trim().trim_end_matches('=');
    base64::engine::general_purpose::STANDARD_NO_PAD.decode(trimmed).or_else(|_| URL_SAFE_NO_PAD.decode(trimmed)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_where_they_were_stored_and_with_a_configured_key() {
        let key = Keyring::generate_key();
        let ring = Keyring::parse(&key).expect("keyring");
        let sealed = ring.seal("whsec_abc", "webhook_secret:acct1").expect("sealed");
        assert!(sealed.starts_with("cova:v1:") && !sealed.contains("whsec_abc"), "{sealed}");
        assert_ne!(sealed, ring.seal("whsec_abc", "webhook_secret:acct1").expect("sealed"), "a fresh nonce");
        assert_eq!(ring.open(&sealed, "webhook_secret:acct1").as_deref(), Ok("whsec_abc"));
        assert_eq!(ring.open(&sealed, "webhook_secret:acct2"), Err(SealError::Damaged), "moved to another row");
        let other = Keyring::parse(&Keyring::generate_key()).expect("keyring");
        assert!(matches!(other.open(&sealed, "webhook_secret:acct1"), Err(SealError::UnknownKey(_))));
        // Stored before sealing: read as it is.
        assert_eq!(ring.open("-100123", "telegram_chat_id:acct1").as_deref(), Ok("-100123"));
    }

    #[test]
    fn a_rotated_ring_opens_old_values_and_seals_with_the_new_key() {
        let (old, new) = (Keyring::generate_key(), Keyring::generate_key());
        let before = Keyring::parse(&old).expect("keyring");
        let sealed = before.seal("-100123", "c").expect("sealed");
        let after = Keyring::parse(&format!("{new}, {old}")).expect("keyring");
        assert_eq!(after.open(&sealed, "c").as_deref(), Ok("-100123"));
        assert!(!after.is_current(&sealed));
        let resealed = after.seal("-100123", "c").expect("sealed");
        assert!(after.is_current(&resealed) && !before.is_current(&resealed));
    }

    #[test]
    fn keys_must_be_32_random_bytes() {
        assert_eq!(Keyring::parse("c2hvcnQ=").err(), Some(SealError::BadKey(1)));
        assert_eq!(Keyring::parse(&STANDARD.encode([0u8; 32])).err(), Some(SealError::BadKey(1)));
        assert!(Keyring::parse("").expect("empty").is_empty());
        assert_eq!(Keyring::parse("").expect("empty").seal("x", "c"), Err(SealError::NoKey));
    }
}
