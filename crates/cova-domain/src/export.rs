//! The flat form of comments for spreadsheets and pipelines: the columns of a CSV or XLSX
//! export and the cells of one comment, shared by the service's export and `cova client`, so
//! both write the same file.

use serde_json::Value;

/// The columns of a CSV or XLSX export.
pub const COLUMNS: [&str; 14] = [
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

/// The cells of one comment (its JSON as the API shows it), in [`COLUMNS`] order. The id,
/// parent and first-seen time are passed apart: the service reads them from its rows.
pub fn cells(comment: &Value, id: &str, parent_id: &str, first_seen_at: &str) -> [String; 14] {
    let text = |key: &str| comment[key].as_str().unwrap_or_default().to_owned();
    let author = |key: &str| comment["author"][key].as_str().unwrap_or_default().to_owned();
    let media: Vec<&str> =
        comment["media"].as_array().map(|m| m.iter().filter_map(|x| x["url"].as_str()).collect()).unwrap_or_default();
    [
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

/// A spreadsheet would run a cell that starts like a formula: such user text gets a leading `'`.
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
        let row = cells(&c, "1", "", "2026-11-23T00:00:00Z");
        assert_eq!(row.len(), COLUMNS.len());
        assert_eq!(row[4], "ann");
        assert_eq!(row[6], "3");
        assert_eq!(row[11], "true");
        assert_eq!(row[13], "/a /b");
        assert_eq!(inert(row[2].clone()), "'=1+1");
        assert_eq!(inert("fine".into()), "fine");
    }
}
