//! The flat form of comments for spreadsheets and pipelines: the columns of a CSV or XLSX
//! export and the cells of one comment, shared by the service's export and `cova client`, so
//! both write the same file.

use serde_json::Value;

/// The columns of a CSV or XLSX export: the post first, so that the files of several posts
/// can be put together and still say which post each comment is under.
pub const COLUMNS: [&str; 16] = [
    "post_url",
    "post_title",
    "id",
    "parent_id",
    "text",
    "author_id",
    "author_handle",
    "author_name",
    "likes",
    "reply_count",
    "created_at",
    "first_seen_at",
    "language",
    "pinned",
    "liked_by_author",
    "media_urls",
];

/// A CSV export starts with a UTF-8 byte order mark: without it, Excel reads the file in the
/// machine's legacy code page and garbles emoji and CJK text.
pub const BOM: &str = "\u{feff}";

/// What a column holds, for formats with typed cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Text,
    Number,
    Boolean,
    /// An RFC 3339 time, or empty.
    Time,
}

/// The kind of the cells of `column` (one of [`COLUMNS`]).
pub fn kind(column: &str) -> Cell {
    match column {
        "likes" | "reply_count" => Cell::Number,
        "pinned" | "liked_by_author" => Cell::Boolean,
        "created_at" | "first_seen_at" => Cell::Time,
        _ => Cell::Text,
    }
}

/// The post whose comments an export holds, and where media links point.
#[derive(Debug, Clone, Copy, Default)]
pub struct Post<'a> {
    pub url: &'a str,
    pub title: &'a str,
    /// The origin media paths are relative to (`https://cova.example`), so that the links of a
    /// file opened elsewhere still work; empty keeps them as they are.
    pub origin: &'a str,
}

/// The title an export shows for a post: its title, else the start of its description.
pub fn post_title(metadata: &Value) -> String {
    let title = metadata["title"].as_str().filter(|t| !t.trim().is_empty());
    let text = title.or_else(|| metadata["description"].as_str()).unwrap_or_default().trim();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The cells of one comment (its JSON as the API shows it), in [`COLUMNS`] order. The id,
/// parent and first-seen time are passed apart: the service reads them from its rows.
pub fn cells(comment: &Value, id: &str, parent_id: &str, first_seen_at: &str, post: &Post<'_>) -> [String; 16] {
    let text = |key: &str| comment[key].as_str().unwrap_or_default().to_owned();
    let author = |key: &str| comment["author"][key].as_str().unwrap_or_default().to_owned();
    let media: Vec<String> = comment["media"]
        .as_array()
        .map(|m| m.iter().filter_map(|x| x["url"].as_str()).map(|u| absolute(u, post.origin)).collect())
        .unwrap_or_default();
    [
        post.url.to_owned(),
        post.title.to_owned(),
        id.to_owned(),
        parent_id.to_owned(),
        text("text"),
        author("id"),
        author("handle"),
        author("name"),
        comment["likes"].as_u64().unwrap_or(0).to_string(),
        comment["reply_count"].as_u64().unwrap_or(0).to_string(),
        text("created_at"),
        first_seen_at.to_owned(),
        text("language"),
        comment["pinned"].as_bool().unwrap_or(false).to_string(),
        comment["liked_by_author"].as_bool().unwrap_or(false).to_string(),
        media.join(" "),
    ]
}

/// A link to cova's media store (`/api/v1/media/…`) with `origin` in front; other links as they are.
fn absolute(url: &str, origin: &str) -> String {
    if url.starts_with('/') { format!("{origin}{url}") } else { url.to_owned() }
}

/// Makes the media links of a comment (its images, its author's avatar) absolute, for files
/// read away from cova.
pub fn absolute_media(comment: &mut Value, origin: &str) {
    // `get_mut`, not indexing: indexing a missing key would add it as `null`.
    let make_absolute = |url: Option<&mut Value>| {
        if let Some(url) = url
            && let Some(u) = url.as_str()
        {
            *url = Value::String(absolute(u, origin));
        }
    };
    if let Some(media) = comment.get_mut("media").and_then(Value::as_array_mut) {
        for m in media {
            make_absolute(m.get_mut("url"));
        }
    }
    make_absolute(comment.pointer_mut("/author/avatar/url"));
}

/// CSV only: a spreadsheet would run a cell that starts like a formula: such user text gets a leading `'`.
pub fn inert(cell: String) -> String {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{cell}") } else { cell }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_comment_fills_every_column_and_formulas_are_defused() {
        let c = json!({"text": "=1+1", "likes": 3, "author": {"handle": "ann"}, "pinned": true,
                       "media": [{"url": "/a"}, {"url": "/b"}]});
        let post = Post { url: "https://www.tiktok.com/@a/video/1", title: "T", origin: "https://cova.example" };
        let row = cells(&c, "1", "", "2026-11-23T00:00:00Z", &post);
        assert_eq!(row.len(), COLUMNS.len());
        assert_eq!((row[0].as_str(), row[1].as_str()), (post.url, "T"));
        assert_eq!(row[6], "ann");
        assert_eq!(row[8], "3");
        assert_eq!(row[13], "true");
        assert_eq!(row[15], "https://cova.example/a https://cova.example/b");
        assert_eq!(inert(row[4].clone()), "'=1+1");
        assert_eq!(kind(COLUMNS[10]), Cell::Time);
        assert_eq!(inert("fine".into()), "fine");
    }

    #[test]
    fn media_links_become_absolute() {
        let mut c = json!({"media": [{"url": "/api/v1/media/file?id=1"}, {"url": "https://x/y"}],
                           "author": {"avatar": {"url": "/api/v1/media/file?id=2"}}});
        absolute_media(&mut c, "https://cova.example");
        assert_eq!(c["media"][0]["url"], "https://cova.example/api/v1/media/file?id=1");
        assert_eq!(c["media"][1]["url"], "https://x/y");
        assert_eq!(c["author"]["avatar"]["url"], "https://cova.example/api/v1/media/file?id=2");
        let mut bare = json!({"text": "no media"});
        absolute_media(&mut bare, "https://cova.example");
        assert_eq!(bare, json!({"text": "no media"}));
    }

    #[test]
    fn a_title_falls_back_to_the_description_cut_short() {
        assert_eq!(post_title(&json!({"title": "Hi", "description": "d"})), "Hi");
        assert_eq!(post_title(&json!({"title": " ", "description": "d"})), "d");
        let long = "é".repeat(300);
        assert_eq!(post_title(&json!({"description": long})).chars().count(), 201);
    }
}
