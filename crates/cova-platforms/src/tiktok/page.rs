//! Post page parsing: rehydration JSON (current), `SIGI_STATE` (older pages), status codes,
//! and the normalised metadata.

use crate::PlatformError;
use crate::json::{bool_of, f64_of, first_url, i64_of, str_of, u32_of, u64_of};
use crate::keywords::description_keywords;
use crate::model::{Cover, Hashtag, Metadata, MetadataAuthor, Metrics, Sound, rfc3339_from_unix};
use serde_json::Value;

/// What a post page contained.
#[derive(Debug)]
pub(crate) enum PageData {
    /// The item, with the author's user and stats records when they live apart (SIGI_STATE).
    Item { item: Value, user: Option<Value>, user_stats: Option<Value> },
    /// A non-zero `statusCode`.
    Status { code: i64, message: String },
    /// No post data (walled, login wall, unknown layout).
    Missing,
}

pub(crate) const STATUS_CAPTCHA: i64 = 10000;

/// The JSON text of `<script id="<id>" ...>…</script>`.
pub(crate) fn script_json<'a>(html: &'a str, id: &str) -> Option<&'a str> {
    let at = html.find(&format!("id=\"{id}\""))?;
    let open_end = at + html[at..].find('>')? + 1;
    let close = open_end + html[open_end..].find("</script>")?;
    Some(html[open_end..close].trim())
}

pub(crate) fn has_post_data(html: &str) -> bool {
    html.contains("__UNIVERSAL_DATA_FOR_REHYDRATION__") || html.contains("id=\"SIGI_STATE\"")
}

/// Extracts the post data of `id` from a page.
pub(crate) fn extract(html: &str, id: &str) -> Result<PageData, PlatformError> {
    if let Some(text) = script_json(html, "__UNIVERSAL_DATA_FOR_REHYDRATION__") {
        let root: Value = serde_json::from_str(text).map_err(|e| {
            PlatformError::Parse(format!("TikTok page data (rehydration script) is not valid JSON: {e}"))
        })?;
        let Some(detail) = root.pointer("/__DEFAULT_SCOPE__/webapp.video-detail") else {
            return Ok(PageData::Missing);
        };
        let code = detail.get("statusCode").and_then(i64_of).unwrap_or(0);
        if code != 0 {
            let message = detail.get("statusMsg").and_then(Value::as_str).unwrap_or_default().to_string();
            return Ok(PageData::Status { code, message });
        }
        return Ok(match detail.pointer("/itemInfo/itemStruct") {
            Some(item) if item.is_object() => PageData::Item { item: item.clone(), user: None, user_stats: None },
            _ => PageData::Missing,
        });
    }
    if let Some(text) = script_json(html, "SIGI_STATE") {
        let state: Value = serde_json::from_str(text)
            .map_err(|e| PlatformError::Parse(format!("TikTok page data (SIGI_STATE) is not valid JSON: {e}")))?;
        if let Some(code) = state.pointer("/VideoPage/statusCode").and_then(i64_of).filter(|c| *c != 0) {
            let message = state.pointer("/VideoPage/statusMsg").and_then(Value::as_str).unwrap_or_default().to_string();
            return Ok(PageData::Status { code, message });
        }
        let Some(item) = state.get("ItemModule").and_then(|m| m.get(id)).filter(|i| i.is_object()) else {
            return Ok(PageData::Missing);
        };
        let handle = match item.get("author") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(a) => a.get("uniqueId").and_then(str_of),
            None => None,
        };
        let lookup = |module: &str| handle.as_ref().and_then(|h| state.get("UserModule")?.get(module)?.get(h).cloned());
        return Ok(PageData::Item { item: item.clone(), user: lookup("users"), user_stats: lookup("stats") });
    }
    Ok(PageData::Missing)
}

/// The error a non-zero TikTok status code stands for (`None` for the retryable captcha).
/// The customer reads what happened in words; the code and TikTok's message go to the log.
pub(crate) fn status_error(code: i64, message: &str) -> Option<PlatformError> {
    let error = match code {
        10216 => PlatformError::AudienceRestricted("the post is private".into()),
        10222 => PlatformError::AudienceRestricted("the author's account is private".into()),
        10240 => PlatformError::AudienceRestricted("the post is visible to the author's friends only".into()),
        // TikTok also answers this when it blocks the egress address: operators read it in the log.
        10204 => PlatformError::Parse(
            "the post was not found: check the link; if it opens in a browser, try again later".into(),
        ),
        10241 => PlatformError::Parse("the post was deleted".into()),
        10231 => PlatformError::Parse("the post is not available in the country cova reads TikTok from".into()),
        STATUS_CAPTCHA => return None,
        _ => PlatformError::Parse("TikTok did not show the post; try again later".into()),
    };
    tracing::info!(tiktok.status = code, tiktok.message = %message, detail = %error.detail(), "TikTok refused a post");
    Some(error)
}

/// Normalises an item into [`Metadata`].
pub(crate) fn metadata(
    id: &str,
    item: &Value,
    user: Option<&Value>,
    user_stats: Option<&Value>,
) -> Result<Metadata, PlatformError> {
    if let Some(item_id) = item.get("id").and_then(str_of)
        && item_id != id
    {
        return Err(PlatformError::Parse(format!("TikTok returned post {item_id} instead of {id}")));
    }
    let photo = item.get("imagePost").filter(|p| p.is_object());
    let video = item.get("video").filter(|v| v.is_object() && v.as_object().is_some_and(|o| !o.is_empty()));
    if item.get("isContentClassified").and_then(bool_of) == Some(true) && video.is_none() && photo.is_none() {
        return Err(PlatformError::AudienceRestricted(
            "the post is age- or audience-restricted: TikTok requires a logged-in viewer".into(),
        ));
    }

    let author_obj = match item.get("author") {
        Some(a @ Value::Object(_)) => Some(a),
        _ => user,
    };
    let author_str = item.get("author").and_then(Value::as_str).map(str::to_string);
    let stats_obj = item.get("authorStats").filter(|s| s.is_object()).or(user_stats);
    let author = MetadataAuthor {
        id: author_obj.and_then(|a| a.get("id")).and_then(str_of),
        handle: author_obj.and_then(|a| a.get("uniqueId")).and_then(str_of).or(author_str),
        name: author_obj.and_then(|a| a.get("nickname")).and_then(str_of),
        avatar_url: author_obj.and_then(|a| {
            ["avatarLarger", "avatarMedium", "avatarThumb"].iter().find_map(|k| a.get(*k).and_then(first_url))
        }),
        verified: author_obj.and_then(|a| a.get("verified")).and_then(bool_of),
        followers: stats_obj.and_then(|s| s.get("followerCount")).and_then(u64_of),
        following: stats_obj.and_then(|s| s.get("followingCount")).and_then(u64_of),
        likes: stats_obj.and_then(|s| s.get("heartCount").or_else(|| s.get("heart"))).and_then(u64_of),
        videos: stats_obj.and_then(|s| s.get("videoCount")).and_then(u64_of),
    };

    // statsV2 carries exact decimal strings; stats is rounded for large numbers.
    let stat = |key: &str| {
        item.get("statsV2")
            .and_then(|s| s.get(key))
            .and_then(u64_of)
            .or_else(|| item.get("stats")?.get(key).and_then(u64_of))
    };
    let metrics = Metrics {
        views: stat("playCount"),
        likes: stat("diggCount"),
        comments: stat("commentCount"),
        shares: stat("shareCount"),
        saves: stat("collectCount"),
        reposts: stat("repostCount"),
    };

    let mut hashtags: Vec<Hashtag> = Vec::new();
    let mut add_tag = |name: Option<String>, id: Option<String>| {
        let Some(name) = name.map(|n| n.trim_start_matches('#').to_string()).filter(|n| !n.is_empty()) else {
            return;
        };
        match hashtags.iter_mut().find(|h| h.name.eq_ignore_ascii_case(&name)) {
            Some(existing) => {
                if existing.id.is_none() {
                    existing.id = id;
                }
            }
            None => hashtags.push(Hashtag { name, id }),
        }
    };
    for c in item.get("challenges").and_then(Value::as_array).into_iter().flatten() {
        add_tag(c.get("title").and_then(str_of), c.get("id").and_then(str_of));
    }
    for t in item.get("textExtra").and_then(Value::as_array).into_iter().flatten() {
        if t.get("type").and_then(i64_of) == Some(1) || t.get("hashtagName").and_then(str_of).is_some() {
            add_tag(t.get("hashtagName").and_then(str_of), t.get("hashtagId").and_then(str_of));
        }
    }

    let sound = item.get("music").filter(|m| m.is_object()).map(|m| Sound {
        id: m.get("id").and_then(str_of),
        title: m.get("title").and_then(str_of),
        author: m.get("authorName").and_then(str_of),
        original: m.get("original").and_then(bool_of),
        duration_s: m.get("duration").and_then(f64_of),
        url: m.get("playUrl").and_then(first_url),
        cover_url: ["coverLarge", "coverMedium", "coverThumb"].iter().find_map(|k| m.get(*k).and_then(first_url)),
    });

    let mut cover = Cover::default();
    let mut push_url = |u: Option<String>| {
        if let Some(u) = u
            && !cover.urls.contains(&u)
        {
            cover.urls.push(u);
        }
    };
    if let Some(v) = video {
        for k in ["cover", "originCover", "dynamicCover"] {
            push_url(v.get(k).and_then(first_url));
        }
    }
    if let Some(p) = photo {
        push_url(p.pointer("/cover/imageURL").and_then(first_url));
        for img in p.get("images").and_then(Value::as_array).into_iter().flatten() {
            push_url(img.get("imageURL").and_then(first_url));
        }
    }
    cover.url = cover.urls.first().cloned();
    let first_image = photo.and_then(|p| p.pointer("/images/0"));
    cover.width =
        video.and_then(|v| v.get("width")).and_then(u32_of).or_else(|| first_image?.get("imageWidth").and_then(u32_of));
    cover.height = video
        .and_then(|v| v.get("height"))
        .and_then(u32_of)
        .or_else(|| first_image?.get("imageHeight").and_then(u32_of));

    let description = item.get("desc").and_then(Value::as_str).unwrap_or_default().to_string();
    let kind = if photo.is_some() { "photo" } else { "video" };
    let handle = author.handle.clone().unwrap_or_else(|| "_".into());
    Ok(Metadata {
        post_ref: format!("tiktok:{id}"),
        platform: "tiktok".into(),
        url: format!("https://www.tiktok.com/@{handle}/{kind}/{id}"),
        title: None,
        description_keywords: description_keywords(&description),
        media: Vec::new(),
        description,
        created_at: item.get("createTime").and_then(i64_of).map(rfc3339_from_unix),
        duration_s: video.and_then(|v| v.get("duration")).and_then(f64_of).filter(|d| *d > 0.0),
        kind: kind.into(),
        // Anything but 0 keeps the comments from viewers (the author turned them off).
        comments_off: item.get("itemCommentStatus").and_then(i64_of).map(|status| status != 0),
        language: item.get("textLanguage").and_then(str_of).filter(|l| l != "un"),
        author,
        metrics,
        hashtags,
        sound,
        cover,
    })
}

/// Metadata from oEmbed, the fallback when the post page is walled (no counts available).
pub(crate) fn metadata_from_oembed(id: &str, o: &Value) -> Metadata {
    let title = o.get("title").and_then(str_of);
    let description = title.clone().unwrap_or_default();
    let handle = o.get("author_unique_id").and_then(str_of);
    let url_handle = handle.clone().unwrap_or_else(|| "_".into());
    let thumb = o.get("thumbnail_url").and_then(str_of);
    Metadata {
        post_ref: format!("tiktok:{id}"),
        platform: "tiktok".into(),
        url: format!("https://www.tiktok.com/@{url_handle}/video/{id}"),
        title: None,
        description_keywords: description_keywords(&description),
        media: Vec::new(),
        description,
        // A TikTok id carries its creation time in the upper 32 bits.
        created_at: id.parse::<u64>().ok().map(|n| rfc3339_from_unix((n >> 32) as i64)),
        duration_s: None,
        kind: "video".into(),
        comments_off: None,
        language: None,
        author: MetadataAuthor { handle, name: o.get("author_name").and_then(str_of), ..Default::default() },
        metrics: Metrics::default(),
        hashtags: Vec::new(),
        sound: None,
        cover: Cover {
            url: thumb.clone(),
            urls: thumb.into_iter().collect(),
            width: o.get("thumbnail_width").and_then(u32_of),
            height: o.get("thumbnail_height").and_then(u32_of),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item_meta(html: &str, id: &str) -> Result<Metadata, PlatformError> {
        match extract(html, id)? {
            PageData::Item { item, user, user_stats } => metadata(id, &item, user.as_ref(), user_stats.as_ref()),
            other => panic!("expected an item, got {other:?}"),
        }
    }

    #[test]
    fn rehydration_page_with_stats_v2_and_hashtags() {
        let html = include_str!("../../tests/fixtures/tiktok_post_rehydration.html");
        let m = item_meta(html, "7279030240315952405").expect("metadata");
        assert_eq!(m.post_ref, "tiktok:7279030240315952405");
        assert_eq!(m.url, "https://www.tiktok.com/@glowlab.official/video/7279030240315952405");
        assert_eq!(m.kind, "video");
        // statsV2 exact strings win over rounded stats.
        assert_eq!(m.metrics.views, Some(12_345_678));
        assert_eq!(m.metrics.likes, Some(1_234_567));
        assert_eq!(m.metrics.comments, Some(4_821));
        assert_eq!(m.metrics.shares, Some(15_503));
        assert_eq!(m.metrics.saves, Some(98_765));
        assert_eq!(m.metrics.reposts, Some(321));
        assert_eq!(m.created_at.as_deref(), Some("2023-09-15T12:34:56Z"));
        assert_eq!(m.duration_s, Some(34.0));
        assert_eq!(m.language.as_deref(), Some("en"));
        assert_eq!(m.author.handle.as_deref(), Some("glowlab.official"));
        assert_eq!(m.author.followers, Some(2_500_000));
        assert_eq!(m.author.verified, Some(true));
        let tags: Vec<(&str, Option<&str>)> = m.hashtags.iter().map(|h| (h.name.as_str(), h.id.as_deref())).collect();
        assert_eq!(tags, vec![("skincare", Some("1001")), ("glowup", Some("1002")), ("serum", Some("1003"))]);
        let sound = m.sound.expect("sound");
        assert_eq!(sound.title.as_deref(), Some("original sound - glowlab.official"));
        assert_eq!(sound.original, Some(true));
        assert_eq!(m.cover.urls.len(), 3);
        assert_eq!(m.cover.width, Some(576));
        assert_eq!(m.description_keywords.mentions, vec!["dermdoc"]);
        assert!(m.description_keywords.words.contains(&"serum".to_string()));
    }

    #[test]
    fn sigi_state_with_author_as_string_and_string_create_time() {
        let html = include_str!("../../tests/fixtures/tiktok_post_sigi.html");
        let m = item_meta(html, "7100000000000000001").expect("metadata");
        assert_eq!(m.author.handle.as_deref(), Some("oldschool"));
        assert_eq!(m.author.name.as_deref(), Some("Old School"));
        assert_eq!(m.author.followers, Some(1200));
        assert_eq!(m.created_at.as_deref(), Some("2022-05-18T09:20:00Z"));
        // Only rounded stats in this payload.
        assert_eq!(m.metrics.views, Some(1_200_000));
    }

    #[test]
    fn photo_post_without_video() {
        let html = include_str!("../../tests/fixtures/tiktok_post_photo.html");
        let m = item_meta(html, "7300000000000000002").expect("metadata");
        assert_eq!(m.kind, "photo");
        assert_eq!(m.url, "https://www.tiktok.com/@pics/photo/7300000000000000002");
        assert_eq!(m.cover.urls.len(), 3);
        assert_eq!(m.cover.width, Some(1080));
        assert_eq!(m.duration_s, None);
    }

    #[test]
    fn status_codes() {
        let html = include_str!("../../tests/fixtures/tiktok_post_private.html");
        let PageData::Status { code, .. } = extract(html, "1").expect("parses") else { panic!("expected status") };
        assert_eq!(code, 10216);
        let expect = [
            (10216, "audience_restricted"),
            (10222, "audience_restricted"),
            (10240, "audience_restricted"),
            (10204, "parse_error"),
            (10241, "parse_error"),
            (10231, "parse_error"),
            (12345, "parse_error"),
        ];
        for (code, api) in expect {
            assert_eq!(status_error(code, "").expect("an error").code().as_str(), api, "{code}");
        }
        assert!(status_error(STATUS_CAPTCHA, "").is_none());
        assert!(status_error(10241, "").expect("error").to_string().contains("deleted"));
        // What a customer reads names no status code, client or region jargon.
        for code in [10216, 10222, 10240, 10204, 10241, 10231, 12345] {
            let detail = status_error(code, "internal message").expect("an error").detail().to_owned();
            assert!(
                !detail.contains("status") && !detail.contains("client") && !detail.contains("internal"),
                "{detail}"
            );
        }
    }

    #[test]
    fn classified_item_without_video_is_audience_restricted() {
        let html = include_str!("../../tests/fixtures/tiktok_post_classified.html");
        assert_eq!(
            item_meta(html, "7200000000000000003").expect_err("restricted").code().as_str(),
            "audience_restricted"
        );
    }

    #[test]
    fn pages_without_data() {
        assert!(matches!(extract("<html>Log in</html>", "1"), Ok(PageData::Missing)));
        let broken = r#"<script id="__UNIVERSAL_DATA_FOR_REHYDRATION__" type="application/json">{oops</script>"#;
        assert_eq!(extract(broken, "1").expect_err("bad json").code().as_str(), "parse_error");
    }

    #[test]
    fn oembed_fallback() {
        let o: Value = serde_json::from_str(include_str!("../../tests/fixtures/tiktok_oembed.json")).expect("fixture");
        let m = metadata_from_oembed("7279030240315952405", &o);
        assert_eq!(m.author.handle.as_deref(), Some("glowlab.official"));
        assert_eq!(m.cover.width, Some(720));
        assert_eq!(m.created_at.as_deref(), Some("2023-09-15T12:34:56Z"));
        assert_eq!(m.metrics, Metrics::default());
    }
}
