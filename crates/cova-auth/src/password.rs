//! Account passwords: the sign-up rules and argon2id hashes (PHC strings, OWASP's parameters:
//! 19 MiB, 2 passes, 1 lane). A password is checked and hashed in its NFKC form, so that the
//! same password typed another way (fullwidth digits, a composed accent) is the same password,
//! and is refused as breached the same way; control characters are refused outright.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;
use std::sync::LazyLock;
use unicode_normalization::UnicodeNormalization;

pub const MIN_CHARS: usize = 10;
pub const MAX_CHARS: usize = 128;

static COMMON: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    include_str!("../data/common-passwords.txt").lines().filter(|l| !l.is_empty() && !l.starts_with('#')).collect()
});

/// Why a password is refused; the message is shown to the person choosing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Weakness {
    #[error("The password needs at least {} characters.", MIN_CHARS)]
    TooShort,
    #[error("The password may have at most {} characters.", MAX_CHARS)]
    TooLong,
    #[error("The password must not contain control characters (such as line breaks or tabs).")]
    ControlCharacter,
    #[error("This password is on lists of breached passwords; choose another.")]
    Common,
    #[error("The password must not contain your e-mail address.")]
    ContainsEmail,
}

/// The sign-up rules: length, not a breached classic (or one with digits and symbols
/// appended), not built from the e-mail address.
pub fn check(password: &str, email: &str) -> Result<(), Weakness> {
    if password.chars().any(char::is_control) {
        return Err(Weakness::ControlCharacter);
    }
    let password = normalize(password);
    let chars = password.chars().count();
    if chars < MIN_CHARS {
        return Err(Weakness::TooShort);
    }
    if chars > MAX_CHARS {
        return Err(Weakness::TooLong);
    }
    let lower = password.to_lowercase();
    let root = lower.trim_end_matches(|c: char| c.is_ascii_digit() || c.is_ascii_punctuation());
    let one_character = lower.chars().next().is_some_and(|first| lower.chars().all(|c| c == first));
    if COMMON.iter().any(|w| *w == lower || *w == root) || one_character {
        return Err(Weakness::Common);
    }
    let local = email.split('@').next().unwrap_or("").to_lowercase();
    if local.chars().count() >= 3 && lower.contains(&local) {
        return Err(Weakness::ContainsEmail);
    }
    Ok(())
}

/// The form a password is checked, hashed and verified in (Unicode NFKC).
pub fn normalize(password: &str) -> String {
    password.nfkc().collect()
}

fn hasher() -> Argon2<'static> {
    // The crate's defaults are OWASP's recommendation; named so a crate update cannot lower them.
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

#[derive(Debug, thiserror::Error)]
#[error("password hashing failed: {0}")]
pub struct HashError(String);

/// The PHC string to store. CPU-bound (tens of milliseconds): call from a blocking thread.
pub fn hash(password: &str) -> Result<String, HashError> {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    let salt = SaltString::encode_b64(&bytes).map_err(|e| HashError(e.to_string()))?;
    hasher()
        .hash_password(normalize(password).as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| HashError(e.to_string()))
}

/// True when `password` matches the stored PHC string. CPU-bound like [`hash`].
pub fn verify(password: &str, stored: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored) else { return false };
    let normal = normalize(password);
    // Hashes stored before passwords were normalised hold the password as it was typed.
    hasher().verify_password(normal.as_bytes(), &parsed).is_ok()
        || (normal != password && hasher().verify_password(password.as_bytes(), &parsed).is_ok())
}

/// Spends the time of a verification when there is no account, so a login for an unknown
/// e-mail answers no faster than a wrong password.
pub fn verify_nothing(password: &str) {
    static DUMMY: LazyLock<String> = LazyLock::new(|| hash("not a password of anyone").unwrap_or_default());
    let _ = verify(password, &DUMMY);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert_eq!(check("short", "a@b.co"), Err(Weakness::TooShort));
        assert_eq!(check(&"x".repeat(129), "a@b.co"), Err(Weakness::TooLong));
        assert_eq!(check("password123", "a@b.co"), Err(Weakness::Common));
        assert_eq!(check("Password2025!", "a@b.co"), Err(Weakness::Common));
        assert_eq!(check("qwertyuiop", "a@b.co"), Err(Weakness::Common));
        assert_eq!(check("aaaaaaaaaaaa", "a@b.co"), Err(Weakness::Common));
        assert_eq!(check("maria.lopez-2024", "maria.lopez@example.com"), Err(Weakness::ContainsEmail));
        assert_eq!(check("correct horse battery", "maria@example.com"), Ok(()));
        // Counted in characters, not bytes.
        assert_eq!(check("żółćżółćżó", "a@b.co"), Ok(()));
        assert_eq!(check("correct horse\0battery", "a@b.co"), Err(Weakness::ControlCharacter));
        assert_eq!(check("correct horse\nbattery", "a@b.co"), Err(Weakness::ControlCharacter));
        // Fullwidth digits are the digits they look like: a breached password either way.
        assert_eq!(check("１２３４５６７８９０", "a@b.co"), check("1234567890", "a@b.co"));
        assert_eq!(check("１２３４５６７８９０", "a@b.co"), Err(Weakness::Common));
        assert_eq!(Weakness::TooShort.to_string(), format!("The password needs at least {MIN_CHARS} characters."));
    }

    #[test]
    fn a_password_typed_another_way_is_the_same_password() {
        // "é" composed and decomposed, fullwidth and ASCII digits.
        let stored = hash("caf\u{e9} au lait 2024").expect("hash");
        assert!(verify("cafe\u{301} au lait 2024", &stored));
        assert!(verify("caf\u{e9} au lait ２０２４", &stored));
        assert!(!verify("cafe au lait 2024", &stored));
    }

    #[test]
    fn hashes_verify_and_are_salted() {
        let a = hash("correct horse battery").expect("hash");
        let b = hash("correct horse battery").expect("hash");
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert_ne!(a, b, "a fresh salt each time");
        assert!(verify("correct horse battery", &a));
        assert!(!verify("correct horse batterY", &a));
        assert!(!verify("correct horse battery", "not a phc string"));
    }
}
