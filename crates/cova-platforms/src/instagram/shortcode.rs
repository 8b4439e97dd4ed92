//! Instagram's shortcodes: a media's numeric id (`pk`) written in base 64 with the alphabet
//! `A–Z a–z 0–9 - _`, most significant digit first. Public codes have 11 characters; a private
//! post's longer code carries the public one in its first 11 characters.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// The length of a public shortcode.
pub const PUBLIC_LEN: usize = 11;
/// The length of a private post's code: the public code and 28 more characters.
pub const PRIVATE_LEN: usize = PUBLIC_LEN + 28;

fn digit(b: u8) -> Option<u64> {
    ALPHABET.iter().position(|a| *a == b).map(|p| p as u64)
}

/// The shortcode a ref names: the public part of `code`, or `None` when it is not one.
pub fn public_code(code: &str) -> Option<&str> {
    let ok = |s: &str| s.bytes().all(|b| digit(b).is_some());
    match code.len() {
        // Older posts have shorter codes; the id still fits 64 bits.
        1..=PUBLIC_LEN if ok(code) && to_pk(code).is_some() => Some(code),
        PRIVATE_LEN if ok(code) => Some(&code[..PUBLIC_LEN]),
        _ => None,
    }
}

/// The media id a public shortcode stands for; `None` for a code that is not one or does not
/// fit 64 bits.
pub fn to_pk(code: &str) -> Option<u64> {
    if code.is_empty() || code.len() > PUBLIC_LEN {
        return None;
    }
    code.bytes().try_fold(0u64, |pk, b| pk.checked_mul(64)?.checked_add(digit(b)?))
}

/// The shortcode of a media id.
pub fn from_pk(mut pk: u64) -> String {
    let mut out = Vec::with_capacity(PUBLIC_LEN);
    loop {
        out.push(ALPHABET[(pk % 64) as usize]);
        pk /= 64;
        if pk == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_ids_convert_both_ways() {
        // C=2, K=10, Z=25, 7=59, -=62, G=6, h=33, k=36, 2=54, j=35 in the alphabet.
        assert_eq!(to_pk("CKZ7-7Ghk2j"), Some(2_493_287_677_538_225_571));
        assert_eq!(from_pk(2_493_287_677_538_225_571), "CKZ7-7Ghk2j");
        for pk in [1_u64, 63, 64, 4_096, 1_234_567_890_123_456_789, u64::MAX >> 2] {
            assert_eq!(to_pk(&from_pk(pk)), Some(pk), "{pk}");
        }
        assert_eq!(from_pk(0), "A");
    }

    #[test]
    fn only_codes_of_the_alphabet_and_length_are_codes() {
        assert_eq!(public_code("CKZ7-7Ghk2j"), Some("CKZ7-7Ghk2j"));
        let private = format!("CKZ7-7Ghk2j{}", "A".repeat(28));
        assert_eq!(public_code(&private), Some("CKZ7-7Ghk2j"));
        for bad in ["", "CKZ7 7Ghk2j", "CKZ7.7Ghk2j", "CKZ7-7Ghk2jX", "___________", "é"] {
            assert_eq!(public_code(bad), None, "{bad:?}");
        }
        assert_eq!(to_pk("___________"), None, "does not fit 64 bits");
    }
}
