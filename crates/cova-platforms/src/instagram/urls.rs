//! Instagram's post URL forms: `/reel/<code>/`, `/reels/<code>/`, `/p/<code>/`, `/tv/<code>/`,
//! each optionally after `/<username>/`, on `instagram.com`, `www.`, `m.` or `instagr.am`;
//! `/share/…` links redirect to one of these and are resolved like a short link.

use super::shortcode;

/// What an Instagram URL names, without network access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A post by its public shortcode.
    Post(String),
    /// A `/share/…` link: its path, to be requested and followed to the post.
    Share(String),
}

pub fn is_instagram_host(host: &str) -> bool {
    matches!(host, "instagram.com" | "www.instagram.com" | "m.instagram.com" | "instagr.am" | "www.instagr.am")
}

/// The post or share link of an Instagram URL's path segments (host already checked); `None`
/// for anything else (a profile, `/reels/audio/…`, `/stories/…`, a code that is not one).
pub fn parse_path(segments: &[&str]) -> Option<Named> {
    let post = |code: &str| shortcode::public_code(code).map(|c| Named::Post(c.to_owned()));
    match segments {
        ["share", rest @ ..] if !rest.is_empty() && rest.iter().all(|s| is_path_word(s)) => {
            Some(Named::Share(format!("/share/{}/", rest.join("/"))))
        }
        // A sound's page lists reels; it is not one.
        ["reels", "audio", ..] => None,
        ["reel" | "reels" | "p" | "tv", code, ..] => post(code),
        [user, "reel" | "reels" | "p" | "tv", code, ..] if is_username(user) => post(code),
        _ => None,
    }
}

/// An Instagram username: 1 to 30 letters, digits, `.` and `_`.
pub fn is_username(s: &str) -> bool {
    (1..=30).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
}

fn is_path_word(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(path: &str) -> Vec<&str> {
        path.split('/').filter(|s| !s.is_empty()).collect()
    }

    #[test]
    fn every_post_form_names_its_code() {
        let code = "CKZ7-7Ghk2j";
        for path in [
            "/reel/CKZ7-7Ghk2j/",
            "/reels/CKZ7-7Ghk2j",
            "/p/CKZ7-7Ghk2j/",
            "/tv/CKZ7-7Ghk2j/",
            "/brand.official/reel/CKZ7-7Ghk2j/",
            "/brand_official/p/CKZ7-7Ghk2j/",
        ] {
            assert_eq!(parse_path(&segments(path)), Some(Named::Post(code.into())), "{path}");
        }
        let private = format!("/p/{code}{}/", "x".repeat(28));
        assert_eq!(parse_path(&segments(&private)), Some(Named::Post(code.into())), "a private post's long code");
        assert_eq!(
            parse_path(&segments("/share/reel/BAHwX1abc/")),
            Some(Named::Share("/share/reel/BAHwX1abc/".into()))
        );
    }

    #[test]
    fn profiles_sounds_and_stories_are_not_posts() {
        for path in
            ["/brand/", "/reels/audio/123456789/", "/stories/brand/123/", "/p/", "/reel/not a code/", "/explore/"]
        {
            assert_eq!(parse_path(&segments(path)), None, "{path}");
        }
        assert!(is_instagram_host("www.instagram.com") && is_instagram_host("instagr.am"));
        assert!(!is_instagram_host("instagram.com.evil.example"));
    }
}
