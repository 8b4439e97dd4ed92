//! Each stored comment's sentiment, judged once by the offline analyzer (at the first spike
//! check after the scrape that stored it, which runs after every collection of a post in the
//! library) and kept with it (a later scrape of the post carries it over): spike checks read
//! labels instead of judging a post's history again, and judge only the comments new to it.

use cova_analyzers::{Label, Offline};
use cova_storage::repo::breakdown;
use cova_storage::{Db, StorageError};

/// Comments judged and written per step (one read, one transaction).
const STEP: i64 = 1_000;

/// Judges the comments of a scrape whose sentiment is not stored yet and stores it; how many.
pub async fn judge_new(db: &Db, job_id: &str) -> Result<usize, StorageError> {
    let mut judged = 0;
    loop {
        let rows = breakdown::unjudged(db, job_id, STEP).await?;
        if rows.is_empty() {
            return Ok(judged);
        }
        let (ids, texts): (Vec<String>, Vec<String>) = rows.into_iter().map(|(id, body)| (id, text_of(&body))).unzip();
        let judged_now = Offline::label_all(texts).await;
        let labels: Vec<(String, i16)> =
            ids.into_iter().zip(judged_now).map(|(id, l)| (id, l.sentiment.code())).collect();
        breakdown::store_sentiments(db, job_id, &labels).await?;
        judged += labels.len();
        if labels.len() < STEP as usize {
            return Ok(judged);
        }
    }
}

/// The text of one stored comment (its body as the API shows it).
fn text_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|c| c["text"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// How many of the stored codes are negative, and how many were judged.
pub fn negative_of(codes: &[Option<i16>]) -> (u64, u64) {
    let judged = codes.iter().flatten().count() as u64;
    let negative = codes.iter().flatten().filter(|c| Label::from_code(**c) == Some(Label::Negative)).count() as u64;
    (negative, judged)
}
