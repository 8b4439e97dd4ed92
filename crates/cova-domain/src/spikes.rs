//! Spike decisions: whether a post's latest comments are far more than its own recent rate, or
//! far more negative than its usual share. Pure functions over counts per time bucket (from
//! the comments' own times), so that a check costs microseconds after each watch run.
//!
//! **Volume.** The window (the latest `window` buckets) is compared with the baseline before
//! it, summed into blocks of the window's length. Counts of comments are over-dispersed (a
//! daily cycle, a share elsewhere), so the test is a negative-binomial tail whose dispersion is
//! fitted to the baseline's blocks (method of moments; Poisson when the blocks vary no more
//! than Poisson counts do), with a gamma prior of one comment a day (worth one block) on the
//! rate, so that a quiet post is not judged on zeros. A spike needs all three: at least `min_comments` in the
//! window, at least `ratio` times the expected count, and a tail probability at most `p_max`.
//!
//! False alarms measured on simulated posts over two weeks, checked every 30 minutes on a
//! one-hour window after 12 days of history (20 posts each, 1,920 checks): at `balanced` and
//! `strict`, none on a steady post, a daily cycle of three to one, or a rate doubling over the
//! fortnight; at `sensitive`, 2 on the steady posts, none on the cycle, 8 on the growth.
//!
//! **Take-off.** A followed creator's new post (at most [`TAKEOFF_MAX_AGE_MS`] old) is compared
//! with the creator's earlier posts at the same age (a post's comment rate falls with age, so
//! like is compared with like): its comments so far against the comments each of the latest
//! [`TAKEOFF_EARLIER`] earlier posts had at that age, counted from their comments' own times. It
//! takes off with at least `ratio` times the earlier posts' median, more than any of them had,
//! and at least `min_comments`; it needs [`TAKEOFF_MIN_EARLIER`] earlier posts collected past
//! that age, and a post takes off once.
//!
//! **Sentiment.** The negative comments among the window's are compared with the baseline's
//! share (a beta prior of 1 in 10 negative, worth 20 comments) by a binomial tail; a dip needs
//! at least `min_comments` judged comments, a share at least `share_rise` above the baseline's,
//! and a tail probability at most `p_max`.

/// How readily an alert fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sensitivity {
    Sensitive,
    Balanced,
    Strict,
}

/// The thresholds of a sensitivity (see the module's text for what each means).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub p_max: f64,
    pub ratio: f64,
    pub min_comments: u64,
    pub share_rise: f64,
}

impl Sensitivity {
    pub const ALL: [Sensitivity; 3] = [Sensitivity::Sensitive, Sensitivity::Balanced, Sensitivity::Strict];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Sensitive => "sensitive",
            Self::Balanced => "balanced",
            Self::Strict => "strict",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub const fn thresholds(self) -> Thresholds {
        match self {
            Self::Sensitive => Thresholds { p_max: 1e-3, ratio: 2.0, min_comments: 10, share_rise: 0.15 },
            Self::Balanced => Thresholds { p_max: 1e-5, ratio: 3.0, min_comments: 20, share_rise: 0.20 },
            Self::Strict => Thresholds { p_max: 1e-7, ratio: 5.0, min_comments: 50, share_rise: 0.30 },
        }
    }
}

/// Comments are counted in buckets of this many minutes.
pub const BUCKET_MIN: u32 = 10;
/// The window judged: the latest hour.
pub const WINDOW_BUCKETS: usize = 6;
/// History read before the window: two weeks of buckets.
pub const HISTORY_BUCKETS: usize = 14 * 24 * 60 / BUCKET_MIN as usize;
pub const HISTORY_MS: i64 = HISTORY_BUCKETS as i64 * BUCKET_MIN as i64 * 60_000;
/// A setting's bounds: the fewest comments in the window an alert may fire on, and the
/// cooldown in minutes.
pub const MIN_COMMENTS_RANGE: (u64, u64) = (5, 10_000);
pub const COOLDOWN_RANGE_MIN: (u32, u32) = (30, 7 * 24 * 60);

/// What an account (or one of its posts or creators) asks of spike alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    pub enabled: bool,
    pub sensitivity: Sensitivity,
    /// The fewest comments in the window an alert fires on; `None` is the sensitivity's own.
    pub min_comments: Option<u64>,
    /// After an alert, the same kind of alert on the same post waits this long: a spike that
    /// goes on is one alert.
    pub cooldown_min: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self { enabled: true, sensitivity: Sensitivity::Balanced, min_comments: None, cooldown_min: 6 * 60 }
    }
}

impl Settings {
    pub fn thresholds(&self) -> Thresholds {
        let mut t = self.sensitivity.thresholds();
        if let Some(min) = self.min_comments {
            t.min_comments = min;
        }
        t
    }
}

/// Counts per bucket of the comments at `times` (unix ms), the last `buckets` buckets of
/// `bucket_min` minutes ending at `now`, oldest first. Comments after `now` or before the
/// first bucket are not counted.
pub fn counts(times: &[i64], now: i64, bucket_min: u32, buckets: usize) -> Vec<u64> {
    let width = i64::from(bucket_min.max(1)) * 60_000;
    let start = now - width * buckets as i64;
    let mut out = vec![0u64; buckets];
    for &t in times {
        if t < start || t >= now {
            continue;
        }
        let i = ((t - start) / width) as usize;
        if let Some(c) = out.get_mut(i) {
            *c += 1;
        }
    }
    out
}

/// The kinds of spike alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The window's comments far above the post's own recent rate.
    Volume,
    /// The window's share of negative comments far above the post's usual share.
    Sentiment,
    /// A creator's new post drawing far more comments than the creator's earlier posts had at
    /// the same age.
    Takeoff,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Volume, Kind::Sentiment, Kind::Takeoff];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Volume => "volume",
            Self::Sentiment => "sentiment",
            Self::Takeoff => "takeoff",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A creator's new post is compared with the creator's earlier posts up to this age.
pub const TAKEOFF_MAX_AGE_MS: i64 = 3 * 24 * 3_600_000;
/// The creator's latest earlier posts it is compared with, and the fewest it needs.
pub const TAKEOFF_EARLIER: usize = 10;
pub const TAKEOFF_MIN_EARLIER: usize = 3;

/// Whether a creator's post published at `published_at` is young enough at `now` to be
/// compared with the creator's earlier posts.
pub fn takeoff_applies(published_at: i64, now: i64) -> bool {
    (0..=TAKEOFF_MAX_AGE_MS).contains(&(now - published_at))
}

/// The time an earlier post (published at `earlier_published`) was as old as the new post
/// (published at `published_at`) is at `now`: its comments before then are compared. `None`
/// when its collection (last at `earlier_collected`) had not reached that age: its count then
/// is unknown.
pub fn same_age(earlier_published: i64, earlier_collected: i64, published_at: i64, now: i64) -> Option<i64> {
    let at = earlier_published + (now - published_at).max(0);
    (earlier_collected >= at).then_some(at)
}

/// A creator's new post against the creator's earlier posts at the same age.
#[derive(Debug, Clone, Copy)]
pub struct Takeoff<'a> {
    /// The post's comments so far.
    pub count: u64,
    /// What each earlier post had at the same age ([`same_age`]).
    pub earlier: &'a [u64],
}

/// The buckets a check of a post reads: from the post's first comment of the last two weeks
/// (`first`, unix ms), so that a young post is judged on the hours it has had, not on days of
/// zeros before it existed; at least the window.
pub fn history_buckets(first: Option<i64>, now: i64) -> usize {
    let width = i64::from(BUCKET_MIN) * 60_000;
    let lived = first.map_or(0, |f| (now - f).max(0) / width + 1);
    usize::try_from(lived).unwrap_or(usize::MAX).clamp(WINDOW_BUCKETS, HISTORY_BUCKETS)
}

/// The first check time at which a post whose first comment came at `first` has history
/// enough for its volume to be judged ([`MIN_BASELINE_BLOCKS`] blocks before the window).
pub fn volume_judged_from(first: i64) -> i64 {
    first + VOLUME_HISTORY_MS
}

/// How long after its first comment a post's volume is first judged: the buckets of
/// [`MIN_BASELINE_BLOCKS`] blocks and the window, the first comment's bucket being the first
/// (6 hours 50 minutes).
pub const VOLUME_HISTORY_MS: i64 =
    ((WINDOW_BUCKETS * (MIN_BASELINE_BLOCKS + 1)) as i64 - 1) * BUCKET_MIN as i64 * 60_000;

/// Whether an alert of `kind` whose window ends at `window_end` is the same spike as the last
/// one of its kind on the post (ending at `last_end`): within the cooldown of `cooldown_min`
/// minutes, or, for a take-off, any earlier one (a post takes off once). Decisions and the
/// recording of an alert (two concurrent checks of one spike) both ask this.
pub fn cooling(kind: Kind, last_end: Option<i64>, window_end: i64, cooldown_min: u32) -> bool {
    match (kind, last_end) {
        (_, None) => false,
        (Kind::Takeoff, Some(_)) => true,
        (_, Some(at)) => window_end - at < i64::from(cooldown_min) * 60_000,
    }
}

/// What one check of a post sees.
#[derive(Debug, Clone)]
pub struct Check<'a> {
    pub settings: Settings,
    /// Comments per bucket ([`counts`]), the window last.
    pub counts: &'a [u64],
    /// Negative comments among the judged ones of the window, and of the baseline before it.
    pub negative: u64,
    pub judged: u64,
    pub base_negative: u64,
    pub base_judged: u64,
    /// When the last alert of each kind on this post ended (its window's end, unix ms).
    pub last_volume: Option<i64>,
    pub last_sentiment: Option<i64>,
    /// A followed creator's new post: its comparison with the creator's earlier posts.
    pub takeoff: Option<Takeoff<'a>>,
    pub last_takeoff: Option<i64>,
    pub now: i64,
}

/// A spike to alert on.
#[derive(Debug, Clone, PartialEq)]
pub struct Spike {
    pub kind: Kind,
    /// Comments in the window.
    pub observed: u64,
    /// The count the post's own rate expects in a window like it.
    pub expected: f64,
    /// The negative share of the window and the post's usual share (sentiment alerts).
    pub share: Option<f64>,
    pub baseline_share: Option<f64>,
    pub p: f64,
}

/// What a check decided for one kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Raise(Spike),
    /// A spike, but one was alerted within the cooldown: the same spike going on.
    Cooling {
        kind: Kind,
    },
    /// Too little history to judge yet (a new post): the check says so rather than guess.
    Waiting {
        kind: Kind,
    },
    Quiet {
        kind: Kind,
    },
}

/// Judges a post's window for each kind of alert, with the cooldown.
pub fn decide(c: &Check<'_>) -> Vec<Decision> {
    if !c.settings.enabled {
        return Vec::new();
    }
    let t = c.settings.thresholds();
    let cooling = |kind, last| cooling(kind, last, c.now, c.settings.cooldown_min);
    let volume = match volume(c.counts, WINDOW_BUCKETS, BUCKET_MIN, t) {
        Volume::NotEnoughHistory { .. } => Decision::Waiting { kind: Kind::Volume },
        Volume::Usual { .. } => Decision::Quiet { kind: Kind::Volume },
        Volume::Spike { .. } if cooling(Kind::Volume, c.last_volume) => Decision::Cooling { kind: Kind::Volume },
        Volume::Spike { observed, expected, p } => {
            Decision::Raise(Spike { kind: Kind::Volume, observed, expected, share: None, baseline_share: None, p })
        }
    };
    let observed: u64 = c.counts.iter().rev().take(WINDOW_BUCKETS).sum();
    let mood = match sentiment(c.negative, c.judged, c.base_negative, c.base_judged, t) {
        Mood::TooFew { .. } => Decision::Quiet { kind: Kind::Sentiment },
        Mood::Usual { .. } => Decision::Quiet { kind: Kind::Sentiment },
        Mood::Dip { .. } if cooling(Kind::Sentiment, c.last_sentiment) => Decision::Cooling { kind: Kind::Sentiment },
        Mood::Dip { share, baseline, p } => Decision::Raise(Spike {
            kind: Kind::Sentiment,
            observed,
            expected: baseline * c.judged as f64,
            share: Some(share),
            baseline_share: Some(baseline),
            p,
        }),
    };
    let mut out = vec![volume, mood];
    if let Some(post) = c.takeoff {
        out.push(match post_takes_off(post.count, post.earlier, t) {
            None => Decision::Waiting { kind: Kind::Takeoff },
            Some(false) => Decision::Quiet { kind: Kind::Takeoff },
            Some(true) if cooling(Kind::Takeoff, c.last_takeoff) => Decision::Cooling { kind: Kind::Takeoff },
            Some(true) => Decision::Raise(Spike {
                kind: Kind::Takeoff,
                observed: post.count,
                expected: median(post.earlier),
                share: None,
                baseline_share: None,
                p: 0.0,
            }),
        });
    }
    out
}

/// The baseline needs this many window-long blocks before a volume spike is judged.
pub const MIN_BASELINE_BLOCKS: usize = 6;

/// What a volume check found.
#[derive(Debug, Clone, PartialEq)]
pub enum Volume {
    /// Too little history to judge: fewer baseline blocks than [`MIN_BASELINE_BLOCKS`].
    NotEnoughHistory { blocks: usize },
    /// Within the post's usual rate.
    Usual { observed: u64, expected: f64, p: f64 },
    /// A spike: `observed` comments in the window against `expected`.
    Spike { observed: u64, expected: f64, p: f64 },
}

/// Judges the latest `window` buckets of `counts` (oldest first, one count per bucket) against
/// the buckets before them.
pub fn volume(counts: &[u64], window: usize, bucket_min: u32, t: Thresholds) -> Volume {
    let window = window.max(1);
    if counts.len() < window {
        return Volume::NotEnoughHistory { blocks: 0 };
    }
    let (history, recent) = counts.split_at(counts.len() - window);
    let observed: u64 = recent.iter().sum();
    // Whole blocks of the window's length, the newest next to the window.
    let blocks: Vec<f64> = history.rchunks_exact(window).map(|b| b.iter().sum::<u64>() as f64).collect();
    if blocks.len() < MIN_BASELINE_BLOCKS {
        return Volume::NotEnoughHistory { blocks: blocks.len() };
    }
    let n = blocks.len() as f64;
    let sum: f64 = blocks.iter().sum();
    // Gamma prior on the rate: one comment a day, worth one block of observation, so that a
    // post without comments yet has a small rate rather than none.
    let block_days = (window as f64 * f64::from(bucket_min.max(1))) / (24.0 * 60.0);
    let mean = (sum + block_days) / (n + 1.0);
    let raw = sum / n;
    let var = blocks.iter().map(|b| (b - raw).powi(2)).sum::<f64>() / (n - 1.0);
    let p = if var > mean * 1.05 {
        // Negative binomial with mean `mean` and variance `var`: size k = mean² / (var − mean).
        negative_binomial_tail(observed, mean, mean * mean / (var - mean))
    } else {
        poisson_tail(observed, mean)
    };
    let expected = mean;
    if observed >= t.min_comments && observed as f64 >= t.ratio * expected && p <= t.p_max {
        Volume::Spike { observed, expected, p }
    } else {
        Volume::Usual { observed, expected, p }
    }
}

/// What a sentiment check found.
#[derive(Debug, Clone, PartialEq)]
pub enum Mood {
    /// Too few judged comments in the window to say.
    TooFew {
        judged: u64,
    },
    Usual {
        share: f64,
        baseline: f64,
        p: f64,
    },
    /// A dip: the negative share of the window far above the baseline's.
    Dip {
        share: f64,
        baseline: f64,
        p: f64,
    },
}

/// The usual share of negative comments of `negative` among `judged`, with a beta prior of 1
/// in 10 negative worth 20 comments (a post without history is judged against 10 %).
pub fn baseline_share(negative: u64, judged: u64) -> f64 {
    (negative as f64 + 2.0) / (judged as f64 + 20.0)
}

/// Judges `negative` of `judged` new comments against `base_negative` of `base_judged` before.
pub fn sentiment(negative: u64, judged: u64, base_negative: u64, base_judged: u64, t: Thresholds) -> Mood {
    if judged < t.min_comments || judged == 0 {
        return Mood::TooFew { judged };
    }
    let baseline = baseline_share(base_negative, base_judged);
    let share = negative as f64 / judged as f64;
    let p = binomial_tail(negative, judged, baseline);
    if share >= baseline + t.share_rise && p <= t.p_max {
        Mood::Dip { share, baseline, p }
    } else {
        Mood::Usual { share, baseline, p }
    }
}

/// A creator's new post against the creator's earlier posts at the same age: `count` comments
/// now, `earlier` the counts the earlier posts had at this age. A spike when the count is at
/// least `ratio` times the earlier median and above the largest earlier count, on at least
/// `min_comments`; `None` with fewer than three earlier posts (not enough to compare with).
pub fn post_takes_off(count: u64, earlier: &[u64], t: Thresholds) -> Option<bool> {
    if earlier.len() < TAKEOFF_MIN_EARLIER {
        return None;
    }
    let top = earlier.iter().copied().max().unwrap_or(0);
    Some(count >= t.min_comments && count as f64 >= t.ratio * median(earlier).max(1.0) && count > top)
}

/// The median of `xs` (the upper one of an even count); 0 for none.
fn median(xs: &[u64]) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).map_or(0.0, |m| *m as f64)
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7): accurate to about 15 digits, enough for tails.
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Sums a tail from its first term's logarithm and the ratio of each term to the one before.
fn tail_from(ln_first: f64, ratio: impl Fn(f64) -> f64, start: u64) -> f64 {
    let mut term = ln_first.exp();
    let mut sum = term;
    let mut i = start as f64;
    // Terms fall geometrically past the mode; stop when they no longer add anything.
    for _ in 0..100_000 {
        term *= ratio(i);
        i += 1.0;
        sum += term;
        if term < sum * 1e-15 {
            break;
        }
    }
    sum.min(1.0)
}

/// P(X ≥ x) for X ~ Poisson(mean).
pub fn poisson_tail(x: u64, mean: f64) -> f64 {
    if x == 0 {
        return 1.0;
    }
    if mean <= 0.0 {
        return 0.0;
    }
    if (x as f64) <= mean {
        return 1.0 - (0..x).map(|i| (i as f64 * mean.ln() - mean - ln_gamma(i as f64 + 1.0)).exp()).sum::<f64>();
    }
    let ln_first = x as f64 * mean.ln() - mean - ln_gamma(x as f64 + 1.0);
    tail_from(ln_first, |i| mean / (i + 1.0), x)
}

/// P(X ≥ x) for X negative-binomial with mean `mean` and size `k` (variance mean + mean²/k).
pub fn negative_binomial_tail(x: u64, mean: f64, k: f64) -> f64 {
    if x == 0 {
        return 1.0;
    }
    if mean <= 0.0 {
        return 0.0;
    }
    let q = mean / (k + mean);
    let ln_pmf = |i: f64| ln_gamma(i + k) - ln_gamma(k) - ln_gamma(i + 1.0) + k * (1.0 - q).ln() + i * q.ln();
    if (x as f64) <= mean {
        return (1.0 - (0..x).map(|i| ln_pmf(i as f64).exp()).sum::<f64>()).max(0.0);
    }
    tail_from(ln_pmf(x as f64), |i| (i + k) / (i + 1.0) * q, x)
}

/// P(X ≥ x) for X ~ Binomial(n, p).
pub fn binomial_tail(x: u64, n: u64, p: f64) -> f64 {
    if x == 0 {
        return 1.0;
    }
    if x > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let (nf, xf) = (n as f64, x as f64);
    let ln_first =
        ln_gamma(nf + 1.0) - ln_gamma(xf + 1.0) - ln_gamma(nf - xf + 1.0) + xf * p.ln() + (nf - xf) * (1.0 - p).ln();
    let mut term = ln_first.exp();
    let mut sum = term;
    for i in x..n {
        let i = i as f64;
        term *= (nf - i) / (i + 1.0) * p / (1.0 - p);
        sum += term;
        if term < sum * 1e-15 {
            break;
        }
    }
    sum.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Thresholds = Sensitivity::Balanced.thresholds();

    /// A deterministic stream of uniform numbers in [0, 1) (xorshift), so the series repeat.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        /// A Poisson draw (Knuth's method; fine for the small means used here).
        fn poisson(&mut self, mean: f64) -> u64 {
            let limit = (-mean).exp();
            let (mut k, mut prod) = (0, self.next());
            while prod > limit {
                k += 1;
                prod *= self.next();
            }
            k
        }
    }

    /// Comments per 10 minutes over `days`, each bucket drawn from `rate(bucket index)`.
    fn series(days: usize, seed: u64, rate: impl Fn(usize) -> f64) -> Vec<u64> {
        let mut rng = Rng(seed);
        (0..days * 144).map(|i| rng.poisson(rate(i))).collect()
    }

    fn alarms(counts: &[u64], t: Thresholds) -> usize {
        // The check after each run of a half-hourly watch, on a window of one hour.
        (12 * 144..counts.len())
            .step_by(3)
            .filter(|end| matches!(volume(&counts[..*end], 6, 10, t), Volume::Spike { .. }))
            .count()
    }

    #[test]
    fn counts_fall_in_their_buckets_and_the_window_is_last() {
        let now = 1_000 * 600_000;
        let times = [now - 1, now - 600_000, now - 600_001, now, now - 3 * 600_000 - 5, 0];
        assert_eq!(counts(&times, now, 10, 4), vec![1, 0, 1, 2]);
    }

    /// A check of `counts` at `now` with the default settings, no comment judged, no earlier
    /// alert and no creator to compare with; each test changes what it is about.
    fn plain(counts: &[u64], now: i64) -> Check<'_> {
        Check {
            settings: Settings::default(),
            counts,
            negative: 0,
            judged: 0,
            base_negative: 0,
            base_judged: 0,
            last_volume: None,
            last_sentiment: None,
            takeoff: None,
            last_takeoff: None,
            now,
        }
    }

    fn check(counts: &[u64], last_volume: Option<i64>, now: i64) -> Vec<Decision> {
        decide(&Check { last_volume, ..plain(counts, now) })
    }

    #[test]
    fn a_burst_is_raised_once_then_cools_down_and_a_new_post_waits() {
        let mut counts = series(12, 7, |_| 2.0);
        let n = counts.len();
        for c in &mut counts[n - WINDOW_BUCKETS..] {
            *c += 20;
        }
        let now = 100 * 86_400_000;
        match &check(&counts, None, now)[0] {
            Decision::Raise(s) => assert!(s.kind == Kind::Volume && s.observed >= 120 && s.expected < 20.0, "{s:?}"),
            other => panic!("{other:?}"),
        }
        // An alert 30 minutes ago: the same spike going on.
        assert_eq!(check(&counts, Some(now - 1_800_000), now)[0], Decision::Cooling { kind: Kind::Volume });
        // Past the cooldown, a spike alerts again.
        assert!(matches!(check(&counts, Some(now - 7 * 3_600_000), now)[0], Decision::Raise(_)));
        assert_eq!(check(&counts[n - 20..], None, now)[0], Decision::Waiting { kind: Kind::Volume });
        let off = Check { settings: Settings { enabled: false, ..Settings::default() }, ..plain(&counts, now) };
        assert!(decide(&off).is_empty(), "alerts turned off decide nothing");
    }

    #[test]
    fn a_sentiment_dip_is_raised_with_its_shares() {
        let counts = series(12, 3, |_| 2.0);
        let c = Check { negative: 30, judged: 40, base_negative: 20, base_judged: 400, ..plain(&counts, 0) };
        match &decide(&c)[1] {
            Decision::Raise(s) => {
                assert_eq!(s.kind, Kind::Sentiment);
                assert!(s.share == Some(0.75) && s.baseline_share.is_some_and(|b| b < 0.06), "{s:?}");
            }
            other => panic!("{other:?}"),
        }
        let few = Check { negative: 3, judged: 4, ..c.clone() };
        assert_eq!(decide(&few)[1], Decision::Quiet { kind: Kind::Sentiment });
        let strict = Check { settings: Settings { min_comments: Some(100), ..Settings::default() }, ..c };
        assert_eq!(decide(&strict)[1], Decision::Quiet { kind: Kind::Sentiment }, "the minimum is the setting's");
    }

    #[test]
    fn tails_match_known_values() {
        // P(X ≥ 10 | Poisson(2)) = 4.6e-5; P(X ≥ 1 | Poisson(1)) = 1 − e⁻¹.
        assert!((poisson_tail(10, 2.0) - 4.649_808_4e-5).abs() < 1e-9);
        assert!((poisson_tail(1, 1.0) - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        // A huge k is Poisson.
        assert!((negative_binomial_tail(10, 2.0, 1e9) - poisson_tail(10, 2.0)).abs() < 1e-8);
        // P(X ≥ 8 | Binomial(10, 0.5)) = 56/1024.
        assert!((binomial_tail(8, 10, 0.5) - 56.0 / 1024.0).abs() < 1e-12);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn a_steady_post_never_alarms_over_two_weeks() {
        for seed in 1..=20 {
            let steady = series(14, seed, |_| 3.0);
            assert_eq!(alarms(&steady, B), 0, "seed {seed}");
            assert_eq!(alarms(&steady, Sensitivity::Strict.thresholds()), 0, "seed {seed}");
        }
    }

    #[test]
    fn a_daily_cycle_and_slow_growth_are_usual() {
        // Three times the comments at the day's peak as at night.
        let day = |i: usize| 2.0 + 1.5 * (std::f64::consts::TAU * (i % 144) as f64 / 144.0).sin();
        for seed in 1..=10 {
            assert_eq!(alarms(&series(14, seed, day), B), 0, "cycle, seed {seed}");
            // Doubling over two weeks.
            let growth = series(14, seed, |i| 2.0 * (1.0 + i as f64 / (14.0 * 144.0)));
            assert_eq!(alarms(&growth, B), 0, "growth, seed {seed}");
        }
    }

    #[test]
    fn a_burst_is_one_spike_with_its_figures() {
        let mut counts = series(3, 7, |_| 3.0);
        // One hour at six times the rate.
        counts.extend([18, 20, 17, 19, 21, 18]);
        match volume(&counts, 6, 10, B) {
            Volume::Spike { observed, expected, p } => {
                assert_eq!(observed, 113);
                assert!((15.0..21.0).contains(&expected), "{expected}");
                assert!(p < 1e-20, "{p}");
            }
            other => panic!("no spike: {other:?}"),
        }
    }

    #[test]
    fn a_quiet_post_needs_a_real_burst() {
        // About one comment an hour.
        let quiet = series(7, 3, |_| 1.0 / 6.0);
        let mut two = quiet.clone();
        two.extend([0, 1, 0, 0, 1, 0]);
        assert!(matches!(volume(&two, 6, 10, B), Volume::Usual { .. }), "two comments in an hour are no spike");
        let mut burst = quiet;
        burst.extend([5, 6, 4, 7, 5, 6]);
        assert!(matches!(volume(&burst, 6, 10, B), Volume::Spike { .. }), "33 in an hour is");
    }

    #[test]
    fn a_new_post_waits_for_history() {
        assert_eq!(volume(&[5, 9, 40], 6, 10, B), Volume::NotEnoughHistory { blocks: 0 });
        assert_eq!(volume(&[1; 30], 6, 10, B), Volume::NotEnoughHistory { blocks: 4 });
    }

    #[test]
    fn a_dip_in_sentiment_needs_enough_comments() {
        // Usually 10 % negative; now 40 of 80.
        assert!(matches!(sentiment(40, 80, 100, 1_000, B), Mood::Dip { .. }));
        assert!(matches!(sentiment(12, 80, 100, 1_000, B), Mood::Usual { .. }));
        assert_eq!(sentiment(5, 8, 100, 1_000, B), Mood::TooFew { judged: 8 });
    }

    #[test]
    fn a_creators_post_is_compared_at_the_same_age() {
        assert_eq!(post_takes_off(500, &[40, 60, 55], B), Some(true));
        assert_eq!(post_takes_off(90, &[40, 60, 55], B), Some(false), "not three times the median");
        assert_eq!(post_takes_off(500, &[40, 60], B), None, "too few earlier posts");
    }

    #[test]
    fn a_creators_new_post_takes_off_once_and_waits_for_earlier_posts() {
        const E: &[u64] = &[12, 9, 15, 11];
        let counts = [0u64; 12];
        let at = |count, earlier: &'static [u64], last_takeoff| Check {
            takeoff: Some(Takeoff { count, earlier }),
            last_takeoff,
            ..plain(&counts, 0)
        };
        let e = E;
        match &decide(&at(80, e, None))[2] {
            Decision::Raise(s) => assert!(s.kind == Kind::Takeoff && s.observed == 80 && s.expected == 12.0, "{s:?}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(decide(&at(30, e, None))[2], Decision::Quiet { kind: Kind::Takeoff }, "under three times");
        // A post takes off once, however long ago the alert was.
        assert_eq!(decide(&at(80, e, Some(-30 * 86_400_000)))[2], Decision::Cooling { kind: Kind::Takeoff });
        assert_eq!(decide(&at(80, &e[..2], None))[2], Decision::Waiting { kind: Kind::Takeoff });
        let plain = Check { takeoff: None, ..at(80, e, None) };
        assert_eq!(decide(&plain).len(), 2, "a post not a creator's new one is not compared");
    }

    #[test]
    fn same_age_needs_a_collection_past_it() {
        let h = 3_600_000;
        // The new post is 5 hours old; an earlier one published 2 days before it.
        let (published, now) = (10 * 24 * h, 10 * 24 * h + 5 * h);
        assert_eq!(same_age(8 * 24 * h, 9 * 24 * h, published, now), Some(8 * 24 * h + 5 * h));
        assert_eq!(same_age(8 * 24 * h, 8 * 24 * h + 4 * h, published, now), None, "collected at 4 hours only");
        assert!(takeoff_applies(published, now) && !takeoff_applies(published, published + 4 * 24 * h));
    }

    #[test]
    fn volume_is_judged_from_the_time_history_buckets_allow() {
        let first = 50 * 86_400_000;
        let from = volume_judged_from(first);
        assert_eq!(from - first, 410 * 60_000, "6 hours and 50 minutes after the first comment");
        let judged = |now| {
            let buckets = history_buckets(Some(first), now);
            let times: Vec<i64> = (0..200).map(|i| first + i * 120_000).filter(|t| *t < now).collect();
            volume(&counts(&times, now, BUCKET_MIN, buckets), WINDOW_BUCKETS, BUCKET_MIN, B)
        };
        assert!(matches!(judged(from - 1), Volume::NotEnoughHistory { .. }));
        assert!(!matches!(judged(from), Volume::NotEnoughHistory { .. }));
        assert_eq!(history_buckets(None, from), WINDOW_BUCKETS);
        assert_eq!(history_buckets(Some(0), from), HISTORY_BUCKETS);
    }

    #[test]
    fn cooling_is_the_same_spike_within_the_cooldown() {
        let h = 3_600_000;
        assert!(cooling(Kind::Volume, Some(10 * h), 12 * h, 180));
        assert!(!cooling(Kind::Volume, Some(10 * h), 13 * h, 180));
        assert!(!cooling(Kind::Sentiment, None, 13 * h, 180));
        assert!(cooling(Kind::Takeoff, Some(0), 1_000 * h, 30));
    }
}
