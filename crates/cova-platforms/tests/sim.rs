//! The adapters against cova-sim over real HTTP on 127.0.0.1.

use cova_platforms::{
    CollectOutcome, Comment, CommentSink, PlatformError, Platforms, PlatformsConfig, PostRef, VecSink, nest,
};
use cova_sim::{
    SimConfig, SimHandle, SimPost, TikTokScenario as S, YouTubeScenario as Y, short_code, tiktok_post_id,
    youtube_video_id,
};
use std::collections::HashSet;
use std::time::{Duration, Instant};

const MAX_RETRIES: u32 = 4;
/// Replies the simulator's `reply_comment` preview carries.
const PREVIEW_REPLIES: usize = 2;

fn config(sim: &SimHandle) -> PlatformsConfig {
    let mut cfg = PlatformsConfig::default();
    cfg.tiktok.web_base_url = sim.base_url().to_string();
    cfg.tiktok.short_link_base_url = Some(sim.base_url().to_string());
    cfg.tiktok.requests_per_second = 0.0;
    cfg.tiktok.max_concurrency_per_host = 8;
    cfg.tiktok.max_retries = MAX_RETRIES;
    cfg.tiktok.retry_base_ms = 1;
    cfg.tiktok.retry_max_ms = 4;
    cfg.youtube.api_base_url = sim.base_url().to_string();
    cfg.youtube.api_key = Some("sim-key".to_string().into());
    cfg.youtube.requests_per_second = 0.0;
    cfg.youtube.max_concurrency = 8;
    cfg.youtube.max_retries = MAX_RETRIES;
    cfg.youtube.retry_base_ms = 1;
    cfg.youtube.retry_max_ms = 4;
    cfg
}

async fn setup(sim_cfg: SimConfig) -> (SimHandle, Platforms) {
    let sim = cova_sim::spawn(sim_cfg).await.expect("simulator starts");
    let platforms = Platforms::new(&config(&sim)).expect("valid config");
    (sim, platforms)
}

fn tiktok(scenario: S, n: u64) -> PostRef {
    PostRef::tiktok(tiktok_post_id(scenario, n))
}

fn youtube(scenario: Y, n: u64) -> PostRef {
    format!("youtube:{}", youtube_video_id(scenario, n)).parse().expect("valid ref")
}

async fn collect(p: &Platforms, post: &PostRef, max: u32) -> Result<(CollectOutcome, Vec<Comment>), PlatformError> {
    let mut sink = VecSink::default();
    let outcome = p.collect_comments(post, max, &mut sink).await?;
    Ok((outcome, sink.comments))
}

fn rfc3339(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0).expect("valid time").to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Checks the sink's stream shape: no duplicates, every reply after its parent.
fn assert_stream_shape(flat: &[Comment]) {
    let mut seen = HashSet::new();
    for c in flat {
        assert!(seen.insert(c.id.clone()), "duplicate comment {}", c.id);
        assert!(c.replies.is_empty());
        if let Some(parent) = &c.parent_id {
            assert!(seen.contains(parent), "reply {} arrived before its parent {parent}", c.id);
        }
    }
}

/// A CDN link without its signature: links signed a second apart expire a second apart.
fn unsigned(url: Option<&str>) -> Option<&str> {
    url.map(|u| u.split('?').next().unwrap_or(u))
}

fn assert_same_comment(got: &Comment, want: &cova_sim::SimComment, platform: &str, parent: Option<&str>) {
    assert_eq!(got.id, want.id);
    assert_eq!(got.text, want.text, "{}", want.id);
    assert_eq!(got.likes, want.likes, "{}", want.id);
    assert_eq!(got.created_at, rfc3339(want.create_time), "{}", want.id);
    assert_eq!(got.parent_id.as_deref(), parent);
    assert_eq!(got.author.id, want.author_id);
    assert_eq!(unsigned(got.author.avatar_url.as_deref()), unsigned(want.avatar_url.as_deref()));
    if parent.is_none() {
        assert_eq!(got.reply_count, want.replies.len() as u64, "{}", want.id);
    }
    if platform == "tiktok" {
        assert_eq!(got.author.handle, want.author_handle);
        assert_eq!(got.author.name, want.author_name);
        assert_eq!(got.language.as_deref(), Some(want.language.as_str()));
        assert_eq!(got.pinned, want.pinned);
        assert_eq!(got.liked_by_author, want.liked_by_author);
        let urls: Vec<_> = got.media.iter().map(|m| unsigned(Some(&m.url))).collect();
        let want_urls: Vec<_> = want.images.iter().map(|m| unsigned(Some(&m.url))).collect();
        assert_eq!(urls, want_urls);
    } else {
        assert_eq!(got.author.handle, want.author_handle);
        assert_eq!(got.author.name, want.author_handle.as_ref().map(|h| format!("@{h}")));
    }
}

/// The collection equals the simulator's truth exactly: same comments, same order, same fields.
fn assert_complete(truth: &SimPost, outcome: &CollectOutcome, flat: Vec<Comment>) {
    assert_stream_shape(&flat);
    assert_eq!(outcome.collected as usize, truth.total_comments());
    assert_eq!(flat.len(), truth.total_comments());
    assert!(!outcome.truncated);
    let nested = nest(flat);
    assert_eq!(nested.len(), truth.comments.len());
    for (got, want) in nested.iter().zip(&truth.comments) {
        assert_same_comment(got, want, &truth.platform, None);
        assert_eq!(got.replies.len(), want.replies.len(), "replies of {}", want.id);
        for (gr, wr) in got.replies.iter().zip(&want.replies) {
            assert_same_comment(gr, wr, &truth.platform, Some(&want.id));
        }
    }
}

/// A capped collection: exactly `max`, all real, top-level comments a prefix of platform order.
fn assert_truncated(truth: &SimPost, outcome: &CollectOutcome, flat: Vec<Comment>, max: u32) {
    assert_stream_shape(&flat);
    assert_eq!(outcome.collected, max);
    assert_eq!(flat.len(), max as usize);
    assert!(outcome.truncated);
    let mut all = HashSet::new();
    for c in &truth.comments {
        all.insert(c.id.clone());
        all.extend(c.replies.iter().map(|r| r.id.clone()));
    }
    assert!(flat.iter().all(|c| all.contains(&c.id)));
    let top: Vec<String> = flat.iter().filter(|c| c.parent_id.is_none()).map(|c| c.id.clone()).collect();
    assert_eq!(top, truth.top_level_ids()[..top.len()].to_vec());
}

async fn tiktok_exact(n: u64) {
    let (sim, p) = setup(SimConfig::default()).await;
    let post = tiktok(S::Normal, n);
    let truth = sim.expected_post(&post.id);
    assert_eq!(truth.total_comments() as u64, n);
    let (outcome, flat) = collect(&p, &post, 100_000).await.expect("collects");
    assert_eq!(outcome.reported_total, if n == 0 { Some(0) } else { Some(n) });
    assert_complete(&truth, &outcome, flat);
    // Replies are asked with the post id as item_id, and only for parents whose replies are
    // not all in the 2-reply preview the list already carries.
    let reply_calls: Vec<_> = sim.requests().into_iter().filter(|r| r.path == "/api/comment/list/reply/").collect();
    let beyond_preview: HashSet<_> =
        truth.comments.iter().filter(|c| c.replies.len() > PREVIEW_REPLIES).map(|c| c.id.clone()).collect();
    let distinct: HashSet<_> = reply_calls.iter().filter_map(|r| r.param("comment_id").map(str::to_string)).collect();
    assert_eq!(distinct, beyond_preview);
    if n >= 1000 {
        assert!(
            truth.comments.iter().any(|c| (1..=PREVIEW_REPLIES).contains(&c.replies.len())),
            "some parents skipped"
        );
    }
    assert!(reply_calls.iter().all(|r| r.param("item_id") == Some(post.id.as_str()) && r.param("aid") == Some("1988")));
}

#[tokio::test]
async fn tiktok_post_with_0_comments() {
    tiktok_exact(0).await;
}

#[tokio::test]
async fn tiktok_post_with_1_comment() {
    tiktok_exact(1).await;
}

#[tokio::test]
async fn tiktok_post_with_49_comments() {
    tiktok_exact(49).await;
}

#[tokio::test]
async fn tiktok_post_with_5000_comments() {
    tiktok_exact(5000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiktok_post_with_20000_comments() {
    tiktok_exact(20_000).await;
}

#[tokio::test]
async fn tiktok_collection_is_capped_at_max() {
    let (sim, p) = setup(SimConfig::default()).await;
    let post = tiktok(S::Normal, 5000);
    let truth = sim.expected_post(&post.id);
    for max in [0u32, 1, 37, 1234] {
        let (outcome, flat) = collect(&p, &post, max).await.expect("collects");
        assert_truncated(&truth, &outcome, flat, max);
    }
    // Exactly as many as the post has is complete, one fewer is truncated.
    let small = tiktok(S::Normal, 49);
    let truth = sim.expected_post(&small.id);
    let (outcome, flat) = collect(&p, &small, 49).await.expect("collects");
    assert_complete(&truth, &outcome, flat);
    let (outcome, flat) = collect(&p, &small, 48).await.expect("collects");
    assert_truncated(&truth, &outcome, flat, 48);
}

fn list_requests(sim: &SimHandle) -> usize {
    sim.requests().iter().filter(|r| r.path == "/api/comment/list/").count()
}

fn with_prefetch(sim: &SimHandle, pages: usize) -> Platforms {
    let mut cfg = config(sim);
    cfg.tiktok.list_prefetch = pages;
    Platforms::new(&cfg).expect("valid config")
}

/// Several chains bring exactly the single chain's comments, through overlapping pages, short
/// pages and a `has_more: 0` in the middle (even counts), and cost at most one request more than
/// the single chain per chain added (where two meet, or one starts past the end).
#[tokio::test]
async fn tiktok_chains_bring_the_same_comments_as_one_chain() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator starts");
    for n in [5000, 4999, 36, 71, 700] {
        let post = tiktok(S::Normal, n);
        let truth = sim.expected_post(&post.id);
        let mut requests = Vec::new();
        for ahead in [0, 4, 8] {
            sim.clear_requests();
            let (outcome, flat) = collect(&with_prefetch(&sim, ahead), &post, 100_000).await.expect("collects");
            assert_complete(&truth, &outcome, flat);
            requests.push(list_requests(&sim));
        }
        eprintln!("{n} comments: list requests with 1, 5, 9 chains: {requests:?}");
        let chain = requests[0];
        for (ahead, got) in [(4, requests[1]), (8, requests[2])] {
            assert!(got <= chain + ahead, "{n} comments, {} chains: {got} list requests, one chain {chain}", ahead + 1);
        }
    }
}

/// Collects `post` (5 ms per platform request) while `post_comments` changes it, once ten
/// top-level pages have been asked for.
async fn collect_while_posting(
    post: &PostRef,
    post_comments: impl FnOnce(&SimHandle),
) -> (SimHandle, CollectOutcome, Vec<Comment>) {
    let (sim, p) = setup(SimConfig { latency_ms: 5, ..SimConfig::default() }).await;
    let collecting = {
        let post = post.clone();
        tokio::spawn(async move { collect(&p, &post, 100_000).await })
    };
    cova_testdb::eventually("ten top-level pages asked for", async || list_requests(&sim) >= 10).await;
    // The platform holds its answers while the comments are posted: the collection is known
    // to be under way when they are, whatever the machine's speed.
    sim.pause();
    assert!(!collecting.is_finished(), "the collection ended before the comments were posted");
    post_comments(&sim);
    sim.resume();
    let (outcome, flat) = collecting.await.expect("joins").expect("collects");
    (sim, outcome, flat)
}

/// Comments posted at the end of the list while it is being read are collected too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiktok_collection_sees_comments_posted_while_it_runs() {
    let post = tiktok(S::Normal, 3000);
    let (sim, outcome, flat) = collect_while_posting(&post, |sim| sim.add_comments(&post.id, 60)).await;
    let truth = sim.expected_post(&post.id);
    assert_eq!(truth.total_comments(), 3060);
    assert_complete(&truth, &outcome, flat);
}

/// Comments posted at the top move every offset down mid-collection: chains that read before
/// and after meet further on than their offsets say, and nothing that was there throughout is
/// lost or repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiktok_collection_survives_the_list_moving() {
    let post = tiktok(S::Normal, 3001);
    let mut before = None;
    let (sim, outcome, flat) = collect_while_posting(&post, |sim| {
        before = Some(sim.expected_post(&post.id));
        sim.add_comments_on_top(&post.id, 25);
    })
    .await;
    let before = before.expect("posted");
    assert_stream_shape(&flat);
    assert_eq!(outcome.collected as usize, flat.len());
    let after = sim.expected_post(&post.id);
    let all = |p: &SimPost| -> HashSet<String> {
        p.comments.iter().flat_map(|c| std::iter::once(c).chain(&c.replies)).map(|c| c.id.clone()).collect()
    };
    let got: HashSet<String> = flat.iter().map(|c| c.id.clone()).collect();
    let missing: Vec<_> = all(&before).difference(&got).cloned().collect();
    assert!(missing.is_empty(), "{} comments lost, e.g. {:?}", missing.len(), missing.first());
    assert!(got.is_subset(&all(&after)), "only comments the post has");
}

async fn youtube_exact(n: u64) {
    let (sim, p) = setup(SimConfig::default()).await;
    let post = youtube(Y::Normal, n);
    let truth = sim.expected_post(&post.id);
    assert_eq!(truth.total_comments() as u64, n);
    let (outcome, flat) = collect(&p, &post, 100_000).await.expect("collects");
    assert_complete(&truth, &outcome, flat);
    // comments.list only for threads whose embedded replies are incomplete.
    let partial = truth.comments.iter().filter(|c| c.replies.len() > 5).count();
    let listed: HashSet<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path == "/youtube/v3/comments")
        .filter_map(|r| r.param("parentId").map(str::to_string))
        .collect();
    assert_eq!(listed.len(), partial);
}

#[tokio::test]
async fn youtube_video_with_0_comments() {
    youtube_exact(0).await;
}

#[tokio::test]
async fn youtube_video_with_1_comment() {
    youtube_exact(1).await;
}

#[tokio::test]
async fn youtube_video_with_49_comments() {
    youtube_exact(49).await;
}

#[tokio::test]
async fn youtube_video_with_5000_comments() {
    youtube_exact(5000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn youtube_video_with_20000_comments() {
    youtube_exact(20_000).await;
}

#[tokio::test]
async fn youtube_collection_is_capped_at_max() {
    let (sim, p) = setup(SimConfig::default()).await;
    let post = youtube(Y::Normal, 5000);
    let truth = sim.expected_post(&post.id);
    for max in [1u32, 150, 2500] {
        let (outcome, flat) = collect(&p, &post, max).await.expect("collects");
        assert_truncated(&truth, &outcome, flat, max);
    }
}

#[tokio::test]
async fn tiktok_metadata_matches_the_post() {
    let (sim, p) = setup(SimConfig::default()).await;
    // 49 % 3 == 1: this post's createTime is a string.
    for (post, kind) in
        [(tiktok(S::Normal, 49), "video"), (tiktok(S::Normal, 300), "video"), (tiktok(S::Photo, 12), "photo")]
    {
        let truth = sim.expected_post(&post.id).metadata;
        let m = p.metadata(&post).await.expect("metadata");
        assert_eq!(m.post_ref, post.to_string());
        assert_eq!(m.kind, kind);
        assert_eq!(m.url, format!("https://www.tiktok.com/@{}/{kind}/{}", truth.author_handle, post.id));
        assert_eq!(m.description, truth.description);
        assert_eq!(m.created_at, Some(rfc3339(truth.create_time)));
        assert_eq!(m.metrics.views, Some(truth.views));
        assert_eq!(m.metrics.likes, Some(truth.likes));
        assert_eq!(m.metrics.comments, Some(truth.comments));
        assert_eq!(m.metrics.shares, Some(truth.shares));
        assert_eq!(m.metrics.saves, Some(truth.saves));
        assert_eq!(m.metrics.reposts, Some(truth.reposts));
        assert_eq!(m.author.handle.as_deref(), Some(truth.author_handle.as_str()));
        assert_eq!(m.author.id.as_deref(), Some(truth.author_id.as_str()));
        assert_eq!(m.author.followers, Some(truth.followers));
        assert_eq!(m.author.likes, Some(truth.hearts));
        assert_eq!(m.author.verified, Some(truth.author_verified));
        let tags: Vec<(String, Option<String>)> = m.hashtags.iter().map(|h| (h.name.clone(), h.id.clone())).collect();
        let want: Vec<(String, Option<String>)> =
            truth.hashtags.iter().map(|(n, i)| (n.clone(), Some(i.clone()))).collect();
        assert_eq!(tags, want);
        assert_eq!(m.cover.urls, truth.cover_urls);
        assert_eq!(m.cover.width, Some(truth.width));
        let sound = m.sound.expect("sound");
        assert_eq!(sound.title.as_deref(), Some(truth.sound.title.as_str()));
        assert_eq!(m.description_keywords.mentions, vec![truth.mention.clone()]);
        assert_eq!(m.description_keywords.hashtags.len(), 3);
        if kind == "video" {
            assert_eq!(m.duration_s, Some(f64::from(truth.duration_s)));
        }
    }
}

#[tokio::test]
async fn tiktok_metadata_from_legacy_and_walled_pages() {
    let (sim, p) = setup(SimConfig::default()).await;
    let legacy = tiktok(S::LegacySigiState, 10);
    let truth = sim.expected_post(&legacy.id).metadata;
    let m = p.metadata(&legacy).await.expect("SIGI_STATE metadata");
    assert_eq!(m.author.handle.as_deref(), Some(truth.author_handle.as_str()));
    assert_eq!(m.author.name.as_deref(), Some(truth.author_name.as_str()));
    assert_eq!(m.author.followers, Some(truth.followers));
    assert_eq!(m.created_at, Some(rfc3339(truth.create_time)));
    // Only the rounded stats exist in this layout.
    assert!(m.metrics.views.is_some());

    let walled = tiktok(S::WalledPage, 10);
    let truth = sim.expected_post(&walled.id).metadata;
    let m = p.metadata(&walled).await.expect("oEmbed fallback");
    assert_eq!(m.author.handle.as_deref(), Some(truth.author_handle.as_str()));
    assert_eq!(m.description, truth.description);
    assert_eq!(m.cover.url.as_deref(), Some(truth.cover_urls[0].as_str()));
    assert!(sim.requests().iter().any(|r| r.path == "/oembed"));
}

#[tokio::test]
async fn tiktok_scenarios_map_to_errors() {
    let (_sim, p) = setup(SimConfig::default()).await;
    let cases = [
        (S::PrivatePost, "audience_restricted", "private"),
        (S::PrivateAccount, "audience_restricted", "account is private"),
        (S::FriendsOnly, "audience_restricted", "friends"),
        (S::AudienceRestricted, "audience_restricted", "logged-in"),
        (S::LoginRedirect, "audience_restricted", "login"),
        (S::Deleted, "parse_error", "deleted"),
        (S::NotFound, "parse_error", "not found"),
        (S::RegionBlocked, "parse_error", "country"),
        (S::CaptchaAlways, "parse_error", "turning cova's requests away"),
        (S::UnsolvableChallenge, "parse_error", "turning cova's requests away"),
        (S::ChallengeRepeats, "parse_error", "turning cova's requests away"),
        (S::EmptyBodyAlways, "parse_error", "turning cova's requests away"),
    ];
    for (scenario, code, detail) in cases {
        let err = p.metadata(&tiktok(scenario, 10)).await.expect_err("scenario fails");
        assert_eq!(err.code().as_str(), code, "{scenario:?}: {err}");
        assert!(err.detail().contains(detail), "{scenario:?}: {err}");
        // The customer reads what happened and what to do; codes and operator advice stay in the log.
        let lower = err.detail().to_lowercase();
        for jargon in ["status 1", "client", "configure", "signer", "proxies", "cookies"] {
            assert!(!lower.contains(jargon), "{scenario:?} says {jargon:?}: {err}");
        }
    }
    for (scenario, code) in [
        (S::PrivatePost, "audience_restricted"),
        (S::FriendsOnly, "audience_restricted"),
        (S::Deleted, "parse_error"),
        (S::RegionBlocked, "parse_error"),
        (S::EmptyBodyAlways, "parse_error"),
    ] {
        let err = collect(&p, &tiktok(scenario, 10), 100).await.expect_err("scenario fails");
        assert_eq!(err.code().as_str(), code, "{scenario:?}: {err}");
    }
}

#[tokio::test]
async fn challenge_page_is_solved_and_the_cookie_sent() {
    let (sim, p) = setup(SimConfig::default()).await;
    let post = tiktok(S::Challenge, 10);
    let m = p.metadata(&post).await.expect("metadata after the challenge");
    assert_eq!(m.post_ref, post.to_string());
    let pages: Vec<_> =
        sim.requests().into_iter().filter(|r| r.path.ends_with(&format!("/video/{}", post.id))).collect();
    assert_eq!(pages.len(), 2, "challenge, then the data");
    assert!(pages[0].header("cookie").is_none_or(|c| !c.contains("_wafchallengeid")));
    assert!(pages[1].header("cookie").is_some_and(|c| c.contains("_wafchallengeid=")));

    // The switch serves a challenge before every post; the cookie is per post.
    let (sim, p) = setup(SimConfig { challenge_all: true, ..SimConfig::default() }).await;
    p.metadata(&tiktok(S::Normal, 3)).await.expect("metadata after the challenge");
    assert_eq!(sim.requests().len(), 2);

    let (sim, p) = setup(SimConfig::default()).await;
    p.metadata(&tiktok(S::ChallengeRepeats, 3)).await.expect_err("challenge keeps coming");
    assert_eq!(sim.requests().len(), 3, "two solved challenges, then give up");
}

#[tokio::test]
async fn transient_failures_are_retried() {
    let (sim, p) = setup(SimConfig::default()).await;
    let cases = [(S::EmptyBodyFirst2, 3), (S::TooManyRequestsFirst2, 3), (S::CaptchaOnce, 2)];
    for (scenario, page_requests) in cases {
        sim.clear_requests();
        let post = tiktok(scenario, 30);
        p.metadata(&post).await.unwrap_or_else(|e| panic!("{scenario:?}: {e}"));
        assert_eq!(sim.requests().len(), page_requests, "{scenario:?}");
    }
    for scenario in [S::EmptyBodyFirst2, S::TooManyRequestsFirst2, S::ServerErrorEvery3rd, S::NonJsonFirst2] {
        let post = tiktok(scenario, 400);
        let truth = sim.expected_post(&post.id);
        let (outcome, flat) = collect(&p, &post, 10_000).await.unwrap_or_else(|e| panic!("{scenario:?}: {e}"));
        assert_complete(&truth, &outcome, flat);
    }
    // Persistent 5xx ends as unavailable after max_retries + 1 attempts.
    let (sim, p) = setup(SimConfig { server_error_every: 1, ..SimConfig::default() }).await;
    let err = p.metadata(&tiktok(S::Normal, 5)).await.expect_err("always 503");
    assert_eq!(err.code().as_str(), "unavailable");
    assert_eq!(sim.requests().len(), MAX_RETRIES as usize + 1);
    // Persistent empty bodies end as a parse error naming the blocking.
    let (sim, p) = setup(SimConfig { empty_body_first: 100, ..SimConfig::default() }).await;
    let err = collect(&p, &tiktok(S::Normal, 5), 10).await.expect_err("always empty");
    assert_eq!(err.code().as_str(), "parse_error");
    assert!(err.detail().contains("turning cova's requests away"), "{err}");
    assert_eq!(sim.requests().len(), MAX_RETRIES as usize + 1);
}

#[tokio::test]
async fn urls_and_short_links_resolve_to_refs() {
    let (sim, p) = setup(SimConfig::default()).await;
    let id = tiktok_post_id(S::Normal, 49);
    let want = format!("tiktok:{id}");
    for url in [
        format!("https://www.tiktok.com/@someone/video/{id}?is_from_webapp=1"),
        format!("https://m.tiktok.com/v/{id}.html"),
        format!("https://vm.tiktok.com/{}/", short_code(id, false)),
        format!("https://vt.tiktok.com/{}/", short_code(id, true)),
        format!("https://www.tiktok.com/t/{}/", short_code(id, false)),
        "https://youtu.be/c0000000049".to_string(),
    ] {
        let got = p.resolve(&url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
        let expected = if url.contains("youtu") { "youtube:c0000000049".to_string() } else { want.clone() };
        assert_eq!(got.to_string(), expected, "{url}");
    }
    let heads: Vec<_> = sim.requests().into_iter().filter(|r| r.method == "HEAD").collect();
    assert_eq!(heads.len(), 3, "one HEAD per short link, no fetch of the post page");
    assert!(
        heads.iter().all(|r| { r.header("user-agent").is_some_and(|ua| ua.starts_with("facebookexternalhit/1.1")) })
    );
    assert!(heads.iter().any(|r| r.path.starts_with("/t/")));

    let err = p.resolve("https://vm.tiktok.com/ZZunknown1/").await.expect_err("unknown short code");
    assert_eq!(err.code().as_str(), "parse_error");
    assert!(err.detail().contains("home page"), "{err}");
    for (bad, detail) in [
        ("notaurl", "is not a web address"),
        ("https://vimeo.com/1", "Unsupported platform"),
        ("https://www.tiktok.com/@x", "Not a post URL"),
    ] {
        let err = p.resolve(bad).await.expect_err(bad);
        assert_eq!(err.code().as_str(), "validation_error");
        assert!(err.detail().contains(detail), "{bad}: {err}");
    }
}

#[tokio::test]
async fn youtube_metadata_and_errors() {
    let (sim, p) = setup(SimConfig::default()).await;
    let post = youtube(Y::Normal, 120);
    let truth = sim.expected_post(&post.id).metadata;
    let m = p.metadata(&post).await.expect("metadata");
    assert_eq!(m.title, truth.title);
    assert_eq!(m.description, truth.description);
    assert_eq!(m.metrics.views, Some(truth.views));
    assert_eq!(m.metrics.comments, Some(120));
    assert_eq!(m.duration_s, Some(f64::from(truth.duration_s)));
    assert_eq!(m.cover.url.as_deref(), truth.cover_urls.last().map(String::as_str));
    assert_eq!(m.created_at, Some(rfc3339(truth.create_time)));

    let (outcome, flat) =
        collect(&p, &youtube(Y::CommentsDisabled, 10), 100).await.expect("disabled is empty, not an error");
    assert_eq!((outcome.collected, outcome.truncated, flat.len()), (0, false, 0));
    assert!(outcome.comments_off, "said, not an empty success");
    let meta = p.metadata(&youtube(Y::CommentsDisabled, 10)).await.expect("metadata still works");
    assert_eq!(meta.comments_off, None, "videos.list does not say");

    assert_eq!(p.metadata(&youtube(Y::NotFound, 1)).await.expect_err("missing").code().as_str(), "parse_error");
    assert_eq!(collect(&p, &youtube(Y::NotFound, 1), 10).await.expect_err("missing").code().as_str(), "parse_error");
    assert_eq!(collect(&p, &youtube(Y::Forbidden, 1), 10).await.expect_err("forbidden").code().as_str(), "parse_error");
    let quota = p.metadata(&youtube(Y::QuotaExceeded, 1)).await.expect_err("quota");
    assert_eq!(quota.code().as_str(), "unavailable");
    assert!(quota.detail().contains("quota"));
    assert_eq!(collect(&p, &youtube(Y::QuotaExceeded, 1), 10).await.expect_err("quota").code().as_str(), "unavailable");

    let flaky = youtube(Y::ServerErrorEvery3rd, 700);
    let (outcome, flat) = collect(&p, &flaky, 10_000).await.expect("retries through 503s");
    assert_complete(&sim.expected_post(&flaky.id), &outcome, flat);

    // No key or a wrong key: unavailable with a clear detail, never the caller's fault.
    let mut cfg = config(&sim);
    cfg.youtube.api_key = None;
    let err = Platforms::new(&cfg).expect("config").metadata(&post).await.expect_err("no key");
    assert_eq!(err.code().as_str(), "unavailable");
    assert!(err.detail().contains("api_key"));
    cfg.youtube.api_key = Some("wrong".to_string().into());
    let err = Platforms::new(&cfg).expect("config").metadata(&post).await.expect_err("bad key");
    assert_eq!(err.code().as_str(), "unavailable");
    assert!(!err.detail().contains("wrong"), "the key never appears in errors");
}

#[tokio::test]
async fn client_hygiene_cookies_user_agent_signer() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator starts");
    let mut cfg = config(&sim);
    cfg.tiktok.cookies.insert("msToken".into(), "tok123".into());
    cfg.tiktok.user_agent = "cova-test-agent".into();
    cfg.tiktok.signer_url = Some(format!("{}/__sim/sign", sim.base_url()));
    cfg.keep_raw = true;
    let p = Platforms::new(&cfg).expect("config");
    let (_, flat) = collect(&p, &tiktok(S::Normal, 60), 1000).await.expect("collects");
    assert!(flat.iter().all(|c| c.raw.as_ref().is_some_and(|r| r.get("cid").is_some())));
    let api: Vec<_> = sim.requests().into_iter().filter(|r| r.path.starts_with("/api/comment/list/")).collect();
    assert!(!api.is_empty());
    for r in &api {
        assert_eq!(r.header("user-agent"), Some("cova-test-agent"));
        assert!(r.header("cookie").is_some_and(|c| c.contains("msToken=tok123")));
        assert!(r.param("X-Bogus").is_some_and(|b| b.starts_with("DFSz")), "signed query");
        assert!(r.header("x-gnarly").is_some_and(|g| g.starts_with("sim-")), "signed header");
        assert_eq!(r.param("app_name"), Some("tiktok_web"));
        assert_eq!(r.param("device_platform"), Some("web_pc"));
    }
}

/// Now, in µs on the clock the simulator stamps the requests it receives with.
fn now_us() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("a clock after 1970");
    i64::try_from(since_epoch.as_micros()).expect("µs fit an i64")
}

/// How many requests under `path` the simulator received, and how long after `since_us` the
/// last of them arrived, in µs.
fn received_since(sim: &cova_sim::SimHandle, path: &str, since_us: i64) -> (usize, i64) {
    let times: Vec<i64> = sim.requests().iter().filter(|r| r.path.starts_with(path)).map(|r| r.received_us).collect();
    (times.len(), times.iter().max().map_or(0, |last| last - since_us))
}

#[tokio::test]
async fn request_rate_is_limited_per_host() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator starts");
    let mut cfg = config(&sim);
    cfg.tiktok.requests_per_second = 40.0;
    let p = Platforms::new(&cfg).expect("config");
    let sent = now_us();
    for _ in 0..9 {
        p.metadata(&tiktok(S::Normal, 1)).await.expect("metadata");
    }
    // At 40/s the ninth request reaches the platform eight intervals of 25 ms after the first
    // was sent at the earliest (a slow machine only adds to it).
    let (n, last) = received_since(&sim, "/@", sent);
    assert_eq!(n, 9);
    assert!(last >= 200_000, "the ninth request arrived {last} µs after the first was sent");
}

/// The queues kept in a cache shared by two processes' adapters (as `cova-app` wires it).
struct SharedQueues(cova_cache::Cache);

impl cova_platforms::QueueStore for SharedQueues {
    fn load<'a>(&'a self, key: &'a str) -> futures::future::BoxFuture<'a, Result<cova_platforms::StoredQueue, String>> {
        Box::pin(async move {
            let v = self.0.load_versioned(key).await.map_err(|e| e.to_string())?;
            Ok(cova_platforms::StoredQueue { version: v.version, bytes: v.bytes, now_us: v.now_us })
        })
    }

    fn store<'a>(
        &'a self,
        key: &'a str,
        expected: u64,
        bytes: &'a [u8],
    ) -> futures::future::BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            self.0.store_versioned(key, expected, bytes, Duration::from_secs(60)).await.map_err(|e| e.to_string())
        })
    }
}

#[tokio::test]
async fn processes_that_share_a_queue_keep_one_rate_per_host_between_them() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator starts");
    let mut cfg = config(&sim);
    cfg.tiktok.requests_per_second = 20.0;
    let cache = cova_cache::Cache::in_memory("pace");
    let store: std::sync::Arc<dyn cova_platforms::QueueStore> = std::sync::Arc::new(SharedQueues(cache));
    let one = Platforms::paced(&cfg, Some(store.clone())).expect("config");
    let two = Platforms::paced(&cfg, Some(store)).expect("config");
    let each = |p: Platforms| async move {
        for _ in 0..5 {
            p.metadata(&tiktok(S::Normal, 1)).await.expect("metadata");
        }
    };
    let sent = now_us();
    tokio::join!(each(one), each(two));
    // Ten requests at 20/s between both: the last reaches the platform nine intervals of 50 ms
    // after the first was sent at the earliest (alone, each would need only four).
    let (n, last) = received_since(&sim, "/@", sent);
    assert_eq!(n, 10);
    assert!(last >= 450_000, "the tenth request arrived {last} µs after the first was sent");
}

struct FailingSink {
    pages: usize,
}

#[async_trait::async_trait]
impl CommentSink for FailingSink {
    async fn page(&mut self, _batch: Vec<Comment>) -> Result<(), PlatformError> {
        self.pages += 1;
        if self.pages == 2 {
            return Err(PlatformError::Unavailable("storage is down".into()));
        }
        Ok(())
    }
}

#[tokio::test]
async fn sink_failure_stops_the_collection() {
    let (_sim, p) = setup(SimConfig::default()).await;
    let mut sink = FailingSink { pages: 0 };
    let err = p.collect_comments(&tiktok(S::Normal, 5000), 5000, &mut sink).await.expect_err("sink fails");
    assert_eq!(err, PlatformError::Unavailable("storage is down".into()));
    assert_eq!(sink.pages, 2);
}

#[tokio::test]
async fn latency_is_applied() {
    let (sim, p) = setup(SimConfig::default()).await;
    sim.set_latency_ms(60);
    let started = Instant::now();
    p.metadata(&tiktok(S::Normal, 1)).await.expect("metadata");
    assert!(started.elapsed() >= Duration::from_millis(60));
}

#[tokio::test]
async fn proxies_rotate_and_a_failing_proxy_rests() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator starts");
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_addr = dead.local_addr().expect("addr");
    drop(dead);
    let mut cfg = config(&sim);
    // The target host exists only behind the proxy: the simulator also answers proxied requests.
    cfg.tiktok.web_base_url = "http://tiktok.proxied.test".into();
    cfg.tiktok.proxies = vec![format!("http://{dead_addr}"), sim.base_url().to_string()];
    let p = Platforms::new(&cfg).expect("config");
    for n in [1, 2, 3, 4] {
        p.metadata(&tiktok(S::Normal, n)).await.expect("metadata through the live proxy");
    }
    // Only the first attempt went to the dead proxy; it then rested and every request succeeded first time.
    assert_eq!(sim.requests().len(), 4);
}

#[tokio::test]
async fn a_tiktok_post_whose_comments_are_off_says_so_on_its_page() {
    let (_sim, p) = setup(SimConfig::default()).await;
    let meta = p.metadata(&tiktok(S::CommentsOff, 12)).await.expect("the post");
    assert_eq!((meta.comments_off, meta.metrics.comments), (Some(true), Some(12)));
    assert_eq!(p.metadata(&tiktok(S::Normal, 12)).await.expect("the post").comments_off, Some(false));
}

#[tokio::test]
async fn a_request_answered_before_its_turn_never_reaches_the_platform() {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator starts");
    let mut cfg = config(&sim);
    cfg.tiktok.requests_per_second = 2.0;
    let p = Platforms::new(&cfg).expect("config");
    // The first request takes the route's turn; the next ones would wait half a second each.
    p.metadata(&tiktok(S::Normal, 1)).await.expect("metadata");
    let answered = tokio_util::sync::CancellationToken::new();
    let asker = cova_platforms::Demand::interactive("acct").answered_by(answered.clone());
    let waiting = tokio::spawn(asker.scope({
        let p = p.clone();
        async move {
            for n in 2..6 {
                p.metadata(&tiktok(S::Normal, n)).await?;
            }
            Ok::<(), PlatformError>(())
        }
    }));
    answered.cancel();
    let outcome = waiting.await.expect("task");
    assert!(matches!(outcome, Err(PlatformError::Abandoned(_))), "{outcome:?}");
    // Another asker's request is not held up by what the answered one left behind.
    p.metadata(&tiktok(S::Normal, 9)).await.expect("metadata");
    let pages: Vec<String> =
        sim.requests().iter().filter(|r| r.path.starts_with("/@")).map(|r| r.path.clone()).collect();
    assert_eq!(pages.len(), 2, "only the first and the last were sent: {pages:?}");
}

mod instagram {
    use super::collect;
    use cova_platforms::{Listing, Platforms, PostRef, parse_url};
    use cova_sim::{InstagramScenario as I, SimConfig, SimCreator, SimCreatorPost, instagram_shortcode};

    async fn setup(sessions: &[&str]) -> (cova_sim::SimHandle, Platforms) {
        let sim = cova_sim::spawn(SimConfig::default()).await.expect("simulator starts");
        let mut cfg = super::config(&sim);
        let ig = &mut cfg.instagram;
        ig.web_base_url = format!("{}/ig", sim.base_url());
        ig.requests_per_second = 0.0;
        ig.retry_base_ms = 1;
        ig.retry_max_ms = 4;
        ig.sessions = sessions.iter().map(|s| s.to_string().into()).collect();
        (sim, Platforms::new(&cfg).expect("valid config"))
    }

    fn post(scenario: I, n: u64) -> PostRef {
        format!("instagram:{}", instagram_shortcode(scenario, n)).parse().expect("a ref")
    }

    #[tokio::test]
    async fn a_visitor_collects_what_it_is_shown_once_each_and_says_it_is_part() {
        let (sim, p) = setup(&[]).await;
        let r = post(I::Normal, 120);
        let truth = sim.expected_instagram_post(&r.id).expect("a simulated post");
        let meta = p.metadata(&r).await.expect("the post");
        assert_eq!((meta.platform.as_str(), meta.url.as_str()), ("instagram", r.canonical_url().as_str()));
        assert_eq!(meta.author.handle.as_deref(), Some(truth.metadata.author_handle.as_str()));
        assert_eq!(
            (meta.metrics.comments, meta.description.as_str()),
            (Some(120), truth.metadata.description.as_str())
        );
        let (outcome, flat) = collect(&p, &r, 5_000).await.expect("the comments");
        // A visitor is shown the first 15 top-level comments and no replies.
        let visible: Vec<&str> =
            truth.comments.iter().take(cova_sim::instagram::VISITOR_LIMIT).map(|c| c.id.as_str()).collect();
        let ids: Vec<&str> = flat.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, visible, "each once, in order, although pages repeat comments");
        assert_eq!((outcome.collected, outcome.partial, outcome.truncated), (15, true, false));
        assert_eq!(outcome.reported_total, Some(120));
        assert_eq!(flat[0].reply_count, truth.comments[0].replies.len() as u64);
        let (capped, few) = collect(&p, &r, 4).await.expect("capped");
        assert_eq!((capped.collected, capped.truncated, capped.partial, few.len()), (4, true, false, 4));
    }

    #[tokio::test]
    async fn a_session_collects_every_comment_with_its_replies() {
        let (sim, p) = setup(&[cova_sim::instagram::SESSION]).await;
        let r = post(I::Normal, 300);
        let truth = sim.expected_instagram_post(&r.id).expect("a simulated post");
        let (outcome, flat) = collect(&p, &r, 5_000).await.expect("the comments");
        super::assert_stream_shape(&flat);
        let want: Vec<&str> = truth
            .comments
            .iter()
            .flat_map(|c| std::iter::once(c.id.as_str()).chain(c.replies.iter().map(|r| r.id.as_str())))
            .collect();
        let got: Vec<&str> = flat.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(got, want);
        assert_eq!((outcome.collected as usize, outcome.partial), (truth.total_comments(), false));
        // The REST path went with the session's cookie.
        assert!(sim.requests().iter().any(|q| q.path.contains("/api/v1/media/")));
    }

    /// Records the queue keys asked for; keeps no queue (every turn is free at once).
    #[derive(Default)]
    struct Keys(std::sync::Mutex<Vec<String>>);

    impl cova_platforms::QueueStore for Keys {
        fn load<'a>(
            &'a self,
            key: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<cova_platforms::StoredQueue, String>> {
            self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(key.to_owned());
            Box::pin(async { Ok(cova_platforms::StoredQueue { version: 0, bytes: None, now_us: 0 }) })
        }

        fn store<'a>(
            &'a self,
            _key: &'a str,
            _expected: u64,
            _bytes: &'a [u8],
        ) -> futures::future::BoxFuture<'a, Result<bool, String>> {
            Box::pin(async { Ok(true) })
        }
    }

    #[tokio::test]
    async fn the_pace_is_kept_per_route_and_session_without_naming_the_session() {
        let (sim, _) = setup(&[]).await;
        let mut cfg = super::config(&sim);
        cfg.instagram.web_base_url = format!("{}/ig", sim.base_url());
        cfg.instagram.sessions = vec![cova_sim::instagram::SESSION.to_owned().into()];
        let keys = std::sync::Arc::new(Keys::default());
        let p = Platforms::paced(&cfg, Some(keys.clone())).expect("config");
        collect(&p, &post(I::Normal, 30), 5_000).await.expect("the comments");
        let seen: std::collections::BTreeSet<String> =
            keys.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect();
        let host = url::Url::parse(sim.base_url()).expect("url").host_str().expect("host").to_owned();
        // The visitor's page and post query on the direct route; the comments with the session.
        let want: std::collections::BTreeSet<String> =
            [format!("instagram|{host}|direct"), format!("instagram|{host}|direct+session-1")].into_iter().collect();
        assert_eq!(seen, want);
        assert!(seen.iter().all(|k| !k.contains(cova_sim::instagram::SESSION)));
    }

    #[tokio::test]
    async fn a_checkpointed_session_is_set_aside_and_its_route_reads_logged_out() {
        let (_sim, p) = setup(&[cova_sim::instagram::CHECKPOINTED_SESSION]).await;
        for _ in 0..2 {
            let (outcome, flat) = collect(&p, &post(I::Normal, 60), 5_000).await.expect("logged out");
            assert_eq!((flat.len(), outcome.partial), (15, true));
        }
    }

    #[tokio::test]
    async fn walls_are_told_apart_and_a_rate_limit_is_waited_out() {
        let (_sim, p) = setup(&[]).await;
        for (scenario, code, detail) in [
            (I::Private, "audience_restricted", "private"),
            (I::LoginWall, "audience_restricted", "logged-in viewers"),
            (I::Deleted, "parse_error", "deleted"),
            (I::Checkpoint, "unavailable", "checking"),
            (I::UnknownShape, "parse_error", "shape"),
        ] {
            let err = p.metadata(&post(scenario, 10)).await.expect_err("a wall");
            assert_eq!(err.code().as_str(), code, "{scenario:?}: {err}");
            assert!(err.detail().contains(detail), "{scenario:?}: {err}");
        }
        p.metadata(&post(I::RateLimitedFirst2, 10)).await.expect("read after the wait");
        let (none, flat) = collect(&p, &post(I::CommentsOff, 10), 100).await.expect("no comments");
        assert!(flat.is_empty() && !none.partial && !none.truncated);
        assert!(none.comments_off, "said, not an empty success");
        let meta = p.metadata(&post(I::CommentsOff, 10)).await.expect("the post");
        assert_eq!((meta.comments_off, meta.metrics.comments), (Some(true), Some(10)));
        assert_eq!(p.metadata(&post(I::Normal, 10)).await.expect("the post").comments_off, Some(false));
    }

    #[tokio::test]
    async fn a_session_follows_both_paging_directions_and_calls_a_stuck_cursor_cut_short() {
        let (sim, p) = setup(&[cova_sim::instagram::SESSION]).await;
        // The first page starts a third of the way down: older pages by max_id, the ones
        // before it by min_id.
        let r = post(I::Headload, 400);
        let truth = sim.expected_instagram_post(&r.id).expect("a simulated post");
        let (outcome, flat) = collect(&p, &r, 5_000).await.expect("the comments");
        super::assert_stream_shape(&flat);
        let mut want: Vec<&str> = truth
            .comments
            .iter()
            .flat_map(|c| std::iter::once(c.id.as_str()).chain(c.replies.iter().map(|r| r.id.as_str())))
            .collect();
        let mut got: Vec<&str> = flat.iter().map(|c| c.id.as_str()).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "every comment once, from both directions");
        assert!(!outcome.cut_short && !outcome.truncated && !outcome.partial, "{outcome:?}");
        let asked: Vec<String> = sim
            .requests()
            .iter()
            .filter(|q| q.path.ends_with("/comments/") && q.path.contains(&truth_pk(&r)))
            .map(|q| {
                if q.param("max_id").is_some() {
                    "max"
                } else if q.param("min_id").is_some() {
                    "min"
                } else {
                    "first"
                }
                .to_owned()
            })
            .collect();
        assert!(asked.iter().any(|a| a == "max") && asked.iter().any(|a| a == "min"), "{asked:?}");

        // A cursor that comes back as it was asked, more still said: cut short, never silent.
        let stuck = post(I::StuckCursor, 300);
        let (outcome, flat) = collect(&p, &stuck, 5_000).await.expect("what was handed out");
        assert!(outcome.cut_short && !outcome.truncated, "{outcome:?}");
        let tops = flat.iter().filter(|c| c.parent_id.is_none()).count();
        assert!(tops > 40 && (outcome.collected as usize) < 300, "{tops} top-level, {} in all", outcome.collected);
    }

    fn truth_pk(r: &PostRef) -> String {
        cova_platforms::instagram::shortcode::to_pk(&r.id).expect("a code").to_string()
    }

    #[tokio::test]
    async fn a_post_gated_for_visitors_is_read_with_a_session() {
        let gated = post(I::Private, 40);
        let (_sim, visitor) = setup(&[]).await;
        let err = visitor.metadata(&gated).await.expect_err("gated without a session");
        assert_eq!(err.code().as_str(), "audience_restricted");
        let (sim, p) = setup(&[cova_sim::instagram::SESSION]).await;
        let truth = sim.expected_instagram_post(&gated.id).expect("a simulated post");
        let meta = p.metadata(&gated).await.expect("read through the session's post query");
        assert_eq!(meta.metrics.comments, Some(40));
        let (outcome, flat) = collect(&p, &gated, 5_000).await.expect("its comments");
        assert_eq!((flat.len(), outcome.partial), (truth.total_comments(), false));
        assert!(sim.requests().iter().any(|q| q.body_bytes > 0 && q.path.ends_with("/graphql/query")));
    }

    #[tokio::test]
    async fn a_share_link_leads_to_its_post() {
        let (_sim, p) = setup(&[]).await;
        let code = instagram_shortcode(I::Normal, 5);
        let r = p.resolve(&format!("https://www.instagram.com/share/reel/{code}/")).await;
        // The public host is not the simulator: a share link is resolved on the configured base.
        assert_eq!(r.expect("resolved").to_string(), format!("instagram:{code}"));
        assert!(matches!(
            parse_url("https://www.instagram.com/share/p/x1/"),
            Ok(cova_platforms::ParsedUrl::ShortLink(_))
        ));
    }

    #[tokio::test]
    async fn a_creator_is_its_id_and_pinned_reels_never_end_the_listing() {
        let (sim, p) = setup(&[]).await;
        let now = chrono::Utc::now().timestamp_millis();
        let hour = 3_600_000;
        let mut brand = SimCreator::instagram(5512, "brand.reels");
        let code = |n: u64| instagram_shortcode(I::Normal, n);
        brand.posts = vec![
            SimCreatorPost { id: code(1), published_at_ms: now - 100 * hour, pinned: true },
            SimCreatorPost { id: code(2), published_at_ms: now - 3 * hour, pinned: false },
            SimCreatorPost { id: code(3), published_at_ms: now - 2 * hour, pinned: false },
            SimCreatorPost { id: code(4), published_at_ms: now - 50 * hour, pinned: false },
        ];
        sim.add_creator(brand);
        let c = p.creator("https://www.instagram.com/brand.reels/reels/").await.expect("the account");
        assert_eq!((c.r#ref().as_str(), c.handle.as_deref()), ("instagram:user:5512", Some("brand.reels")));
        let known = |r: &PostRef| r.id == code(4);
        let found = p
            .creator_posts(&c, &Listing { since: now - 10 * hour, known: &known, max_pages: 3 })
            .await
            .expect("the reels");
        let ids: Vec<String> = found.iter().map(|f| f.post.id.clone()).collect();
        assert_eq!(ids, [code(3), code(2)], "the old pinned reel is skipped and does not end the walk");
        sim.rename_creator("5512", "brand.renamed");
        let renamed = p.creator("https://www.instagram.com/brand.renamed/").await.expect("renamed");
        assert_eq!(renamed.r#ref(), c.r#ref());
        let gone = p.creator("https://www.instagram.com/brand.reels/").await.expect_err("the old name");
        assert_eq!(gone.code().as_str(), "not_found");
    }
}
