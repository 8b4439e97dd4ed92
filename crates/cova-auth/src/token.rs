use rand::Rng;
use ring::digest;
use subtle::ConstantTimeEq;

pub const TOKEN_PREFIX: &str = "cova_";
const RANDOM_LEN: usize = 30;
const CHECKSUM_LEN: usize = 6;
const DISPLAY_LEN: usize = TOKEN_PREFIX.len() + 8;
const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A freshly generated token: the full value is shown once and never stored.
#[derive(Debug)]
pub struct GeneratedToken {
    pub value: String,
    pub hash: String,
    pub prefix: String,
}

pub fn generate() -> GeneratedToken {
    let mut rng = rand::rng();
    let random: String = (0..RANDOM_LEN).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
    let value = format!("{TOKEN_PREFIX}{random}{}", checksum(&random));
    GeneratedToken { hash: hash_token(&value), prefix: display_prefix(&value), value }
}

/// Hex SHA-256 of the whole token: what the database stores and looks up.
pub fn hash_token(token: &str) -> String {
    hex::encode(digest::digest(&digest::SHA256, token.as_bytes()))
}

/// The part of a token shown in listings and used to revoke it.
pub fn display_prefix(token: &str) -> String {
    token.chars().take(DISPLAY_LEN).collect()
}

/// True when the string has the token's form and a valid checksum (no database needed).
pub fn looks_like_token(candidate: &str) -> bool {
    let Some(body) = candidate.strip_prefix(TOKEN_PREFIX) else {
        return false;
    };
    if body.len() != RANDOM_LEN + CHECKSUM_LEN || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    let (random, check) = body.split_at(RANDOM_LEN);
    checksum(random).as_bytes().ct_eq(check.as_bytes()).into()
}

fn checksum(random: &str) -> String {
    let mut n = crc32(random.as_bytes());
    let mut out = [b'0'; CHECKSUM_LEN];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// CRC-32 (IEEE), bitwise: only ever run over 30 bytes.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_validate_and_differ() {
        let a = generate();
        let b = generate();
        assert_ne!(a.value, b.value);
        assert!(looks_like_token(&a.value));
        assert_eq!(a.value.len(), TOKEN_PREFIX.len() + RANDOM_LEN + CHECKSUM_LEN);
        assert_eq!(a.hash, hash_token(&a.value));
        assert_eq!(a.hash.len(), 64);
        assert!(a.value.starts_with(&a.prefix));
    }

    #[test]
    fn tampered_token_fails_checksum() {
        let t = generate().value;
        let mut bytes = t.into_bytes();
        let i = TOKEN_PREFIX.len() + 3;
        bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
        let tampered = String::from_utf8(bytes).expect("ascii");
        assert!(!looks_like_token(&tampered));
        assert!(!looks_like_token("cova_short"));
        assert!(!looks_like_token("Bearer xyz"));
    }

    #[test]
    fn crc32_known_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
