//! Topic-exchange routing-key patterns, as RabbitMQ matches them: words separated by `.`,
//! `*` matches exactly one word, `#` zero or more.

pub fn topic_matches(pattern: &str, key: &str) -> bool {
    fn go(p: &[&str], k: &[&str]) -> bool {
        match (p.first(), k.first()) {
            (None, None) => true,
            (Some(&"#"), _) => go(&p[1..], k) || (!k.is_empty() && go(p, &k[1..])),
            (Some(&"*"), Some(_)) => go(&p[1..], &k[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &k[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let k: Vec<&str> = key.split('.').collect();
    go(&p, &k)
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn patterns() {
        assert!(topic_matches("#", "job.complete"));
        assert!(topic_matches("job.*", "job.failed"));
        assert!(topic_matches("job.complete", "job.complete"));
        assert!(!topic_matches("job.complete", "job.failed"));
        assert!(!topic_matches("job.*", "keyword.alert.new"));
        assert!(topic_matches("keyword.#", "keyword.alert.new"));
        assert!(topic_matches("#.new", "keyword.alert.new"));
        assert!(!topic_matches("*", "job.complete"));
    }
}
