//! The type of an image from its first bytes: what a file is, whatever its upstream said.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageType {
    Jpeg,
    Png,
    Gif,
    Webp,
    Avif,
}

impl ImageType {
    pub const fn content_type(self) -> &'static str {
        match self {
            ImageType::Jpeg => "image/jpeg",
            ImageType::Png => "image/png",
            ImageType::Gif => "image/gif",
            ImageType::Webp => "image/webp",
            ImageType::Avif => "image/avif",
        }
    }

    pub fn from_content_type(content_type: &str) -> Option<Self> {
        [ImageType::Jpeg, ImageType::Png, ImageType::Gif, ImageType::Webp, ImageType::Avif]
            .into_iter()
            .find(|t| t.content_type() == content_type)
    }

    pub const fn extension(self) -> &'static str {
        match self {
            ImageType::Jpeg => "jpg",
            ImageType::Png => "png",
            ImageType::Gif => "gif",
            ImageType::Webp => "webp",
            ImageType::Avif => "avif",
        }
    }
}

/// The image type of `bytes`, or `None` for anything else (HTML, SVG, scripts…).
pub fn sniff(bytes: &[u8]) -> Option<ImageType> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageType::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageType::Png)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(ImageType::Gif)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(ImageType::Webp)
    } else if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" && matches!(&bytes[8..12], b"avif" | b"avis") {
        Some(ImageType::Avif)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_from_bytes() {
        assert_eq!(sniff(b"\xFF\xD8\xFF\xE0rest"), Some(ImageType::Jpeg));
        assert_eq!(sniff(b"GIF89a..."), Some(ImageType::Gif));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some(ImageType::Webp));
        assert_eq!(sniff(b"\0\0\0\x1cftypavif"), Some(ImageType::Avif));
        assert_eq!(sniff(b"<svg xmlns="), None, "SVG can carry scripts: never served as an image");
        assert_eq!(sniff(b""), None);
        assert_eq!(ImageType::Webp.content_type(), "image/webp");
    }
}
