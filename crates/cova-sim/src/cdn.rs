//! The platforms' CDN. Like the real ones, its links are signed and expire
//! (`?x-expires=<unix seconds>&x-signature=<hex>`): an unsigned, tampered or expired link
//! answers 403. Every image is a valid PNG with its own bytes (the 1×1 pixel followed by its
//! name), so two images never share a content hash by accident.
//!
//! - `img/<name>.png`: an image (padded to `SimConfig::image_bytes`).
//! - `redirect/<name>?to=<url>`: a redirect to `to` (SSRF tests: the target must be checked).
//! - `trap/<name>`: an image served to anyone, unsigned. Posts of the `hostile_media` scenario
//!   point at it through links cova must refuse; a recorded request to it proves a leak.

use crate::server::{PNG_1X1, Req};
use actix_web::HttpResponse;

/// How long a link is valid after the simulator hands it out (TikTok's are a few hours).
pub const LINK_TTL_S: i64 = 6 * 3600;

fn signature(path: &str, expires: i64) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("sim-cdn:{path}:{expires}").as_bytes());
    hex::encode(&digest.as_ref()[..16])
}

/// The signed link of `path` (under `/cdn/`), valid until `expires` (unix seconds).
pub(crate) fn link(base: &str, path: &str, expires: i64) -> String {
    format!("{base}/cdn/{path}?x-expires={expires}&x-signature={}", signature(path, expires))
}

/// The bytes of the image `name`.
pub fn image_bytes(name: &str) -> Vec<u8> {
    let mut bytes = PNG_1X1.to_vec();
    bytes.extend_from_slice(name.as_bytes());
    bytes
}

/// Answers a CDN request for `path`; `now` is the CDN's clock (unix seconds), `pad` the
/// smallest image size.
pub(crate) fn handle(r: &Req, path: &str, now: i64, pad: usize) -> HttpResponse {
    if let Some(name) = path.strip_prefix("trap/") {
        return png(image_bytes(name));
    }
    let expires = r.param("x-expires").and_then(|e| e.parse::<i64>().ok());
    let valid = expires.is_some_and(|e| r.param("x-signature") == Some(signature(path, e).as_str()));
    if !valid {
        return denied("the link is not signed");
    }
    if expires.is_some_and(|e| e < now) {
        return denied("the link has expired");
    }
    if let Some(name) = path.strip_prefix("img/") {
        let mut bytes = image_bytes(name);
        if bytes.len() < pad {
            bytes.resize(pad, 0);
        }
        png(bytes)
    } else if path.starts_with("redirect/") {
        match r.param("to") {
            Some(to) => HttpResponse::Found().insert_header(("location", to)).finish(),
            None => HttpResponse::BadRequest().finish(),
        }
    } else if path.starts_with("audio/") {
        // An MPEG frame header is enough for players to recognise the type.
        HttpResponse::Ok().content_type("audio/mpeg").body(vec![0xff, 0xfb, 0x90, 0x64, 0, 0, 0, 0])
    } else {
        HttpResponse::NotFound().finish()
    }
}

fn png(bytes: Vec<u8>) -> HttpResponse {
    HttpResponse::Ok().content_type("image/png").insert_header(("cache-control", "max-age=86400")).body(bytes)
}

fn denied(why: &str) -> HttpResponse {
    HttpResponse::Forbidden()
        .content_type("application/xml")
        .body(format!("<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>{why}</Message></Error>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_signed_per_path_and_expiry() {
        let a = link("http://sim", "img/a.png", 100);
        assert!(a.starts_with("http://sim/cdn/img/a.png?x-expires=100&x-signature="));
        assert_ne!(signature("img/a.png", 100), signature("img/a.png", 101));
        assert_ne!(signature("img/a.png", 100), signature("img/b.png", 100));
        assert_ne!(image_bytes("a.png"), image_bytes("b.png"));
    }
}
