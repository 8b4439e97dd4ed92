//! `COVA_BENCH_ONLY=instagram`: an Instagram post collected at the default pace, with a
//! session and logged out.

use super::Report;
use cova_sim::SimConfig;
use std::time::Instant;

/// Comments of the Instagram post the `instagram` section collects.
const INSTAGRAM_COMMENTS: u64 = 1_000;

/// Collecting a 1,000-comment Instagram post at the default pace (`platforms.instagram.
/// requests_per_second`), with a session (every comment) and logged out (a visitor's part),
/// against the rate bound: the requests it took, spaced at the pace.
async fn instagram_collection(report: &mut Report) {
    let sim = cova_sim::spawn(SimConfig::default()).await.expect("sim");
    let mut config = cova_config::Config::default();
    let rate = config.platforms.instagram.requests_per_second;
    cova_tests::use_simulator(&mut config, &sim);
    config.platforms.instagram.requests_per_second = rate;
    let code = cova_sim::instagram_shortcode(cova_sim::InstagramScenario::Normal, INSTAGRAM_COMMENTS);
    let post: cova_platforms::PostRef = format!("instagram:{code}").parse().expect("ref");
    for (name, sessions) in [("session", vec!["sim-session".to_owned().into()]), ("logged_out", Vec::new())] {
        let mut platforms_config = config.platforms.clone();
        platforms_config.instagram.sessions = sessions;
        let platforms = cova_platforms::Platforms::new(&platforms_config).expect("platforms");
        sim.clear_requests();
        let started = Instant::now();
        let mut sink = cova_platforms::VecSink::default();
        let outcome = platforms.collect_comments(&post, INSTAGRAM_COMMENTS as u32, &mut sink).await.expect("collect");
        // The metadata read comes first in a job: its requests belong to the collection.
        let took = started.elapsed().as_secs_f64();
        let ig: Vec<_> = sim.requests().into_iter().filter(|r| r.path.starts_with("/ig/")).collect();
        let requests = ig.len();
        // Each route keeps its own pace: the visitor's (the page, the post) and the session's
        // (its REST pages), one after the other. On each, the first request goes at once and
        // each later one waits its slot.
        let with_session = ig.iter().filter(|r| r.path.starts_with("/ig/api/v1/media/")).count();
        let paced = |n: usize| n.saturating_sub(1) as f64 / rate;
        let bound = paced(with_session) + paced(requests - with_session);
        report.add(
            &format!("instagram_collect_{INSTAGRAM_COMMENTS}_{name}"),
            format!(
                "{took:.1} s for {} of {} comments{} in {requests} requests at {rate} per second; rate bound {bound:.1} s ({:.3}×)",
                outcome.collected,
                outcome.reported_total.unwrap_or(0),
                if outcome.partial { " (a visitor's part)" } else { "" },
                took / bound.max(f64::EPSILON)
            ),
        );
    }
    sim.stop().await;
}

pub(super) async fn run(report: &mut Report) {
    instagram_collection(report).await;
}
