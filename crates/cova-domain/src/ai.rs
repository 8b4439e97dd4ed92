//! The tasks of an AI job: what a quote covers and which fields its result carries.

/// The tasks a quote may name; a quote without a list covers all of them.
pub const TASKS: [&str; 7] = ["summary", "sentiment", "topics", "questions", "languages", "spam", "phrase_matches"];

/// The result fields of a task (`spam` gives `spam_share` and `spam_ids`).
pub fn fields(task: &str) -> &'static [&'static str] {
    match task {
        "summary" => &["summary"],
        "sentiment" => &["sentiment"],
        "topics" => &["topics"],
        "questions" => &["questions"],
        "languages" => &["languages"],
        "spam" => &["spam_share", "spam_ids"],
        "phrase_matches" => &["phrase_matches"],
        _ => &[],
    }
}

/// The task set of a request: known names, each once, in the canonical order; all of them when
/// none is named. `Err` names the unknown one.
pub fn task_set(requested: Option<&[String]>) -> Result<Vec<&'static str>, String> {
    let Some(requested) = requested else { return Ok(TASKS.to_vec()) };
    if let Some(unknown) = requested.iter().find(|t| !TASKS.contains(&t.as_str())) {
        return Err(format!("`{unknown}` is not a task; the tasks are {}.", TASKS.join(", ")));
    }
    let set: Vec<&'static str> = TASKS.iter().copied().filter(|t| requested.iter().any(|r| r == t)).collect();
    if set.is_empty() {
        return Err("`tasks` names no task; leave it out for all of them.".into());
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_sets() {
        assert_eq!(task_set(None).expect("all").len(), TASKS.len());
        let some = task_set(Some(&["topics".into(), "sentiment".into(), "topics".into()])).expect("two");
        assert_eq!(some, ["sentiment", "topics"], "canonical order, each once");
        assert!(task_set(Some(&["mood".into()])).expect_err("unknown").contains("mood"));
        assert!(task_set(Some(&[])).is_err());
        assert_eq!(fields("spam"), ["spam_share", "spam_ids"]);
    }
}
