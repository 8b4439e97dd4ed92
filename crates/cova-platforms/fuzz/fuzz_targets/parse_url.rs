//! The URL parser never panics, and every post it recognises round-trips through its canonical forms.

#![no_main]

use cova_platforms::{ParsedUrl, PostRef, parse_url};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else { return };
    if let Ok(ParsedUrl::Post(post)) = parse_url(input) {
        assert_eq!(parse_url(&post.canonical_url()), Ok(ParsedUrl::Post(post.clone())));
        assert_eq!(post.to_string().parse::<PostRef>(), Ok(post));
    }
});
