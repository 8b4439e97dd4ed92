//! Bearer secrets of the workspace: session cookies, CSRF tokens, e-mailed links and page
//! tokens. Each is 256 bits of CSPRNG output, base64url; what is stored is its SHA-256.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use subtle::ConstantTimeEq;

/// A new secret: the value goes to the browser or the e-mail once, `hash` to the database.
#[derive(Debug, Clone)]
pub struct Secret {
    pub value: String,
    pub hash: String,
}

pub fn generate() -> Secret {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let value = URL_SAFE_NO_PAD.encode(bytes);
    Secret { hash: hash(&value), value }
}

/// The stored form of a secret.
pub fn hash(value: &str) -> String {
    crate::hash_token(value)
}

/// True when `value` has the form [`generate`] makes (43 base64url characters): anything else
/// is refused before a lookup.
pub fn well_formed(value: &str) -> bool {
    value.len() == 43 && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Constant-time equality for secrets compared in memory (the CSRF token).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_well_formed_and_hashed() {
        let a = generate();
        let b = generate();
        assert_ne!(a.value, b.value);
        assert!(well_formed(&a.value), "{}", a.value);
        assert!(!well_formed("short") && !well_formed(&format!("{}!", &a.value[..42])));
        assert_eq!(a.hash, hash(&a.value));
        assert_eq!(a.hash.len(), 64);
        assert!(same(&a.value, &a.value.clone()) && !same(&a.value, &b.value) && !same("a", "ab"));
    }
}
