//! Deterministic generation of posts and their comments from (seed, platform, id).

use crate::rules::{TikTokScenario, YouTubeScenario, decode_tiktok_id, decode_youtube_id, fnv};
use serde::Serialize;

/// splitmix64: small, fast and good enough for test data.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, salt: &str) -> Self {
        Self(seed ^ fnv(salt.as_bytes()))
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The complete truth of a simulated post.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimPost {
    /// `tiktok` or `youtube`.
    pub platform: String,
    pub id: String,
    pub scenario: String,
    pub metadata: SimMetadata,
    /// Top-level comments in platform order, each with its replies.
    pub comments: Vec<SimComment>,
}

impl SimPost {
    /// Top-level comments plus replies.
    pub fn total_comments(&self) -> usize {
        self.comments.iter().map(|c| 1 + c.replies.len()).sum()
    }

    /// Every comment id, top-level ones first (platform order), then all replies.
    pub fn top_level_ids(&self) -> Vec<String> {
        self.comments.iter().map(|c| c.id.clone()).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimMetadata {
    pub title: Option<String>,
    pub description: String,
    pub create_time: i64,
    pub duration_s: u32,
    /// `video` or `photo`.
    pub kind: String,
    pub language: String,
    pub author_id: String,
    pub author_handle: String,
    pub author_name: String,
    pub author_avatar_url: String,
    pub author_verified: bool,
    pub followers: u64,
    pub following: u64,
    pub hearts: u64,
    pub videos: u64,
    pub views: u64,
    pub likes: u64,
    /// The comment count the platform reports (top-level plus replies).
    pub comments: u64,
    pub shares: u64,
    pub saves: u64,
    pub reposts: u64,
    /// `(name, id)` in order: challenges first, then tags only found in the text.
    pub hashtags: Vec<(String, String)>,
    pub mention: String,
    pub sound: SimSound,
    pub cover_urls: Vec<String>,
    pub width: u32,
    pub height: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimSound {
    pub id: String,
    pub title: String,
    pub author: String,
    pub original: bool,
    pub duration_s: u32,
    pub url: String,
    pub cover_url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimComment {
    pub id: String,
    pub text: String,
    pub author_id: String,
    /// `None` when the platform sends only the user id.
    pub author_handle: Option<String>,
    pub author_name: Option<String>,
    pub avatar_url: Option<String>,
    pub likes: u64,
    pub create_time: i64,
    pub language: String,
    pub pinned: bool,
    pub liked_by_author: bool,
    pub images: Vec<SimImage>,
    pub replies: Vec<SimComment>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimImage {
    pub url: String,
    pub width: u32,
    pub height: u32,
}

const BRANDS: &[&str] = &["GlowLab", "Lumiskin", "NovaTech", "Zestly", "AuraPods", "Kobalt", "Mirae"];
const PRODUCTS: &[&str] = &["serum", "earbuds", "blender", "sneakers", "lip tint", "desk lamp", "hoodie"];
const HANDLES: &[&str] = &[
    "maria.lopez",
    "kenji_t",
    "aisha.k",
    "lucas.br",
    "emma_rose",
    "dani.codes",
    "priya.s",
    "yuki.chan",
    "omar_h",
    "sofia.m",
    "noah.b",
    "lea.fr",
    "mehmet.y",
    "putri.id",
    "ivan.k",
];

/// The tone of a comment posted at a chosen time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tone {
    /// One of the usual comments.
    Usual,
    /// An angry one.
    Negative,
}

/// Angry comments, for a post whose comments turn negative.
const NEGATIVE: &[&str] = &[
    "This is terrible, worst purchase ever. I want a refund!",
    "Awful quality, it broke after one day. Total scam 😡",
    "Disappointed and angry, customer service ignored me. Never again.",
    "Horrible experience, the product is fake and useless.",
    "Worst brand ever, do not buy this garbage.",
];

/// (language, template); `{b}` brand, `{p}` product, `{h}` a handle.
const TEXTS: &[(&str, &str)] = &[
    ("en", "where to buy this?? 😍"),
    ("en", "price please 🙏"),
    ("en", "what's the price of the {p}?"),
    ("en", "I got the {p} from {b} and it broke after a week 😤"),
    ("en", "this is actually so good 🔥🔥"),
    ("en", "@{h} look at this 😂"),
    ("en", "does it ship to Canada?"),
    ("en", "FREE FOLLOWERS 💰💰 check my profile → bit.ly/free-f0llowers"),
    ("en", "link in bio? https://example.com/shop/{p}"),
    ("en", "is {b} legit or a scam?"),
    ("en", "who else is watching this at 3am 💀"),
    ("en", "need this {p} asap"),
    ("es", "¿dónde lo compro? 😍"),
    ("es", "¿qué precio tiene el {p}?"),
    ("es", "me encanta ❤️ {b} nunca falla"),
    ("pt", "onde compra? 😍😍"),
    ("pt", "amei demais, qual o preço?"),
    ("de", "Wo kann man das kaufen?"),
    ("de", "Preis? Sieht super aus 👍"),
    ("fr", "c'est où pour acheter ? 🤔"),
    ("fr", "trop bien 🔥 {b} c'est la meilleure marque"),
    ("ja", "これどこで買えますか？😍"),
    ("ko", "어디서 살 수 있어요? 가격이 궁금해요"),
    ("ar", "بكم السعر؟ 😍"),
    ("hi", "यह कहाँ मिलेगा? 😍"),
    ("ru", "Где купить? 😍"),
    ("tr", "Nereden alabilirim? Fiyatı ne?"),
    ("id", "beli dimana kak? 😍"),
];

const TAGS: &[&str] =
    &["skincare", "glowup", "tech", "unboxing", "fashion", "foodtok", "haul", "review", "diy", "fitness"];

fn fill(template: &str, rng: &mut Rng) -> String {
    template
        .replace("{b}", rng.pick::<&str>(BRANDS))
        .replace("{p}", rng.pick::<&str>(PRODUCTS))
        .replace("{h}", rng.pick::<&str>(HANDLES))
}

/// Rounds to two significant digits, as TikTok's `stats` does for large numbers.
pub(crate) fn rounded(n: u64) -> u64 {
    if n < 1000 {
        return n;
    }
    let mut scale = 1u64;
    while n / scale >= 100 {
        scale *= 10;
    }
    (n / scale) * scale
}

/// How `n` comments split into top-level comments and replies per parent: 30% are replies;
/// the first parent gets up to 130 replies (several reply pages), the rest go in small groups.
fn shape(n: u64, rng: &mut Rng) -> Vec<u64> {
    let replies = n * 3 / 10;
    let top = n - replies;
    let mut counts = vec![0u64; top as usize];
    if top == 0 {
        return counts;
    }
    let mut left = replies;
    let first = left.min(130);
    counts[0] = first;
    left -= first;
    let spread = top.min(40 + top / 3);
    while left > 0 {
        let idx = 1 + rng.below(spread.saturating_sub(1).max(1)) as usize;
        let idx = idx.min(counts.len() - 1);
        let chunk = (1 + rng.below(12)).min(left);
        counts[idx] += chunk;
        left -= chunk;
    }
    counts
}

pub(crate) struct Gen<'a> {
    pub seed: u64,
    pub base: &'a str,
    /// When the CDN links of the posts generated now expire (unix seconds).
    pub expires: i64,
}

impl Gen<'_> {
    /// The signed CDN link of `path`.
    fn cdn(&self, path: &str) -> String {
        crate::cdn::link(self.base, path, self.expires)
    }

    fn comment(&self, rng: &mut Rng, platform: &str, id: String, time: i64, top_level: bool) -> SimComment {
        let (language, template) = *rng.pick(TEXTS);
        let text = fill(template, rng);
        let uid_only = platform == "tiktok" && rng.chance(9);
        let handle = format!("{}{}", rng.pick(HANDLES), rng.below(100));
        let author_id = if platform == "tiktok" {
            format!("69{:017}", rng.below(100_000_000_000_000_000))
        } else if platform == "instagram" {
            format!("{}", 1_000_000 + rng.below(60_000_000_000))
        } else {
            format!("UC{:022}", rng.below(10_000_000_000_000_000_000)).chars().take(24).collect()
        };
        let images = if platform == "tiktok" && top_level && rng.chance(15) {
            vec![SimImage { url: self.cdn(&format!("img/c{id}.png")), width: 640, height: 480 }]
        } else {
            Vec::new()
        };
        let likes = {
            let r = rng.below(1000);
            r * r / 200
        };
        SimComment {
            text,
            author_handle: (!uid_only).then(|| handle.clone()),
            author_name: (!uid_only).then(|| handle.replace(['.', '_'], " ")),
            avatar_url: (!uid_only).then(|| self.cdn(&format!("img/a{author_id}.png"))),
            author_id,
            likes,
            create_time: time,
            language: language.to_string(),
            pinned: false,
            liked_by_author: platform == "tiktok" && rng.chance(12),
            images,
            replies: Vec::new(),
            id,
        }
    }

    fn comments(&self, platform: &str, post_id: &str, n: u64, post_time: i64) -> Vec<SimComment> {
        let mut rng = Rng::new(self.seed, &format!("{platform}:{post_id}:comments"));
        let counts = shape(n, &mut rng);
        let id_salt = fnv(format!("{}:{post_id}", self.seed).as_bytes());
        let mut serial = 0u64;
        let mut next_id = |parent: Option<&str>| {
            serial += 1;
            match (platform, parent) {
                ("tiktok", _) => {
                    (7_300_000_000_000_000_000u64 + (id_salt % 1_000_000_000_000) * 1_000_000 + serial).to_string()
                }
                ("instagram", _) => {
                    (17_900_000_000_000_000u64 + (id_salt % 1_000_000_000) * 1_000_000 + serial).to_string()
                }
                // comments.list finds the video from the thread id, so it embeds the video id.
                (_, None) => format!("Ugz{post_id}{serial:07}"),
                (_, Some(p)) => format!("{p}.8r{serial:07}"),
            }
        };
        let mut out = Vec::with_capacity(counts.len());
        for (i, replies) in counts.iter().enumerate() {
            let id = next_id(None);
            let time = post_time + 60 + i as i64 * 37 + rng.below(30) as i64;
            let mut c = self.comment(&mut rng, platform, id, time, true);
            for r in 0..*replies {
                let rid = next_id(Some(&c.id));
                let rtime = time + 5 + r as i64 * 11;
                let reply = self.comment(&mut rng, platform, rid, rtime, false);
                c.replies.push(reply);
            }
            out.push(c);
        }
        // Posts with an even count have a pinned first comment.
        if n.is_multiple_of(2)
            && platform == "tiktok"
            && let Some(first) = out.first_mut()
        {
            first.pinned = true;
        }
        out
    }

    fn metadata(&self, platform: &str, post_id: &str, n: u64, create_time: i64, photo: bool) -> SimMetadata {
        let mut rng = Rng::new(self.seed, &format!("{platform}:{post_id}:meta"));
        let brand = *rng.pick(BRANDS);
        let product = *rng.pick(PRODUCTS);
        let t1 = *rng.pick(TAGS);
        let t2 = TAGS[(TAGS.iter().position(|t| *t == t1).unwrap_or(0) + 1) % TAGS.len()];
        let t3 = TAGS[(TAGS.iter().position(|t| *t == t1).unwrap_or(0) + 2) % TAGS.len()];
        let mention = rng.pick(HANDLES).to_string();
        let handle = format!("{}.official", brand.to_lowercase());
        let description = format!(
            "The {product} everyone asks about: {brand} {product} review, price and where to buy 🔥 thanks @{mention} #{t1} #{t2} #{t3}"
        );
        let views = 10_000 + rng.below(50_000_000);
        let likes = views / (5 + rng.below(20));
        let cover_urls = if photo {
            (1..=3).map(|k| self.cdn(&format!("img/p{post_id}-{k}.png"))).collect()
        } else if platform == "youtube" {
            ["default", "medium", "high", "maxres"]
                .iter()
                .map(|s| self.cdn(&format!("img/yt-{post_id}-{s}.png")))
                .collect()
        } else {
            ["cover", "origin", "dynamic"].iter().map(|s| self.cdn(&format!("img/{s}-{post_id}.png"))).collect()
        };
        let (width, height) = if photo {
            (1080, 1440)
        } else if platform == "youtube" {
            (1280, 720)
        } else {
            (576, 1024)
        };
        let tag_id = |t: &str| (1000 + fnv(t.as_bytes()) % 1_000_000).to_string();
        SimMetadata {
            title: (platform == "youtube").then(|| format!("{brand} {product} review #shorts")),
            description,
            create_time,
            duration_s: 5 + rng.below(55) as u32,
            kind: if photo { "photo" } else { "video" }.into(),
            language: "en".into(),
            author_id: format!("68{:017}", rng.below(100_000_000_000_000_000)),
            author_name: format!("{brand} ✨"),
            author_avatar_url: self.cdn(&format!("img/avatar-{handle}.png")),
            author_handle: handle.clone(),
            author_verified: rng.chance(2),
            followers: 1_000 + rng.below(5_000_000),
            following: rng.below(2_000),
            hearts: 10_000 + rng.below(90_000_000),
            videos: 1 + rng.below(900),
            views,
            likes,
            comments: n,
            shares: likes / (3 + rng.below(30)),
            saves: likes / (2 + rng.below(20)),
            reposts: rng.below(5_000),
            hashtags: vec![(t1.into(), tag_id(t1)), (t2.into(), tag_id(t2)), (t3.into(), tag_id(t3))],
            mention,
            sound: SimSound {
                id: format!("72{:017}", rng.below(100_000_000_000_000_000)),
                title: format!("original sound - {handle}"),
                author: format!("{brand} ✨"),
                original: true,
                duration_s: 30,
                url: self.cdn(&format!("audio/{post_id}.mp3")),
                cover_url: self.cdn(&format!("img/music-{post_id}.png")),
            },
            cover_urls,
            width,
            height,
        }
    }

    pub fn tiktok(&self, id: u64) -> SimPost {
        let (scenario, n) = decode_tiktok_id(id);
        let sid = id.to_string();
        // A TikTok id carries its creation time in the upper 32 bits.
        let create_time = (id >> 32) as i64;
        let photo = scenario == TikTokScenario::Photo;
        let mut comments = if scenario == TikTokScenario::CommentsOff {
            Vec::new()
        } else {
            self.comments("tiktok", &sid, n, create_time)
        };
        if scenario == TikTokScenario::HostileMedia {
            self.hostile_images(&mut comments);
        }
        SimPost {
            platform: "tiktok".into(),
            id: sid.clone(),
            scenario: scenario.to_string(),
            metadata: self.metadata("tiktok", &sid, n, create_time, photo),
            comments,
        }
    }

    /// Gives every top-level comment an image link cova must refuse, in turn: the simulator's
    /// trap under another host name (off the allow-list), a signed CDN redirect to that trap
    /// on loopback, `file://`, and the cloud metadata address.
    fn hostile_images(&self, comments: &mut [SimComment]) {
        let loopback = self.base.replace("127.0.0.1", "localhost");
        for (k, c) in comments.iter_mut().enumerate() {
            let url = match k % 4 {
                0 => format!("{loopback}/cdn/trap/host-{}.png", c.id),
                1 => {
                    let to = format!("{loopback}/cdn/trap/redirect-{}.png", c.id);
                    let to: String = url::form_urlencoded::byte_serialize(to.as_bytes()).collect();
                    format!("{}&to={to}", self.cdn(&format!("redirect/{}.png", c.id)))
                }
                2 => "file:///etc/passwd".to_owned(),
                _ => "http://169.254.169.254/latest/meta-data/iam/security-credentials/".to_owned(),
            };
            c.images = vec![SimImage { url, width: 64, height: 64 }];
        }
    }

    /// New top-level comments posted after the post was first read: `extra` of them, appended
    /// in platform order with ids unlike any generated before, and counted in the metadata.
    pub fn grow(&self, post: &mut SimPost, extra: u64) {
        let new = self.new_comments(post, extra, "grown", 500_000);
        post.comments.extend(new);
        post.metadata.comments += extra;
    }

    /// Comments posted at chosen times (unix seconds) and tones, after the others.
    pub fn post_at(&self, post: &mut SimPost, timed: &[(i64, Tone)]) {
        let mut rng = Rng::new(self.seed, &format!("{}:{}:timed", post.platform, post.id));
        let base = post.comments.iter().flat_map(|c| std::iter::once(c).chain(&c.replies)).count() as u64;
        let mut sorted = timed.to_vec();
        sorted.sort_by_key(|(t, _)| *t);
        for (k, (time, tone)) in sorted.into_iter().enumerate() {
            let id = if post.platform == "tiktok" {
                let first: u64 =
                    post.comments.first().and_then(|c| c.id.parse().ok()).unwrap_or(7_300_000_000_000_000_000);
                (first + 1_300_000 + base + k as u64).to_string()
            } else {
                format!("Ugz{}m{k:06}", post.id)
            };
            let mut c = self.comment(&mut rng, &post.platform, id, time, true);
            if tone == Tone::Negative {
                c.text = NEGATIVE[k % NEGATIVE.len()].to_owned();
                c.language = "en".into();
            }
            post.comments.push(c);
            post.metadata.comments += 1;
        }
    }

    /// As [`Gen::grow`], with the new comments at the top of the list.
    pub fn grow_on_top(&self, post: &mut SimPost, extra: u64) {
        let new = self.new_comments(post, extra, "on-top", 900_000);
        post.comments.splice(0..0, new);
        post.metadata.comments += extra;
    }

    fn new_comments(&self, post: &SimPost, extra: u64, label: &str, serial_gap: u64) -> Vec<SimComment> {
        let mut new = Vec::new();
        if extra == 0 {
            return new;
        }
        let mut rng = Rng::new(self.seed, &format!("{}:{}:{label}:{extra}", post.platform, post.id));
        let last_time = post.comments.iter().map(|c| c.create_time).max().unwrap_or(post.metadata.create_time);
        let base = post.comments.iter().flat_map(|c| std::iter::once(c).chain(&c.replies)).count() as u64;
        for k in 1..=extra {
            let id = if post.platform == "tiktok" {
                let first: u64 =
                    post.comments.first().and_then(|c| c.id.parse().ok()).unwrap_or(7_300_000_000_000_000_000);
                // Past every generated serial of this post (at most one per comment).
                (first + serial_gap + base + k).to_string()
            } else {
                format!("Ugz{}{}{k:06}", post.id, if label == "grown" { "n" } else { "t" })
            };
            new.push(self.comment(&mut rng, &post.platform, id, last_time + 60 * k as i64, true));
        }
        new
    }

    /// An Instagram post by its media id (`pk`); its ref is its shortcode.
    pub fn instagram(&self, pk: u64) -> SimPost {
        let (scenario, n) = crate::rules::decode_instagram_pk(pk);
        let code = crate::rules::shortcode_of(pk);
        let create_time = 1_700_000_000 + (pk % 30_000_000) as i64;
        let off = matches!(scenario, crate::rules::InstagramScenario::CommentsOff);
        SimPost {
            platform: "instagram".into(),
            id: code.clone(),
            scenario: format!("{scenario:?}"),
            metadata: self.metadata("instagram", &code, n, create_time, false),
            comments: if off { Vec::new() } else { self.comments("instagram", &code, n, create_time) },
        }
    }

    pub fn youtube(&self, id: &str) -> SimPost {
        let (scenario, n) = decode_youtube_id(id);
        let create_time = 1_700_000_000 + (fnv(id.as_bytes()) % 30_000_000) as i64;
        let disabled = scenario == YouTubeScenario::CommentsDisabled;
        SimPost {
            platform: "youtube".into(),
            id: id.to_string(),
            scenario: format!("{scenario:?}"),
            metadata: self.metadata("youtube", id, n, create_time, false),
            comments: if disabled { Vec::new() } else { self.comments("youtube", id, n, create_time) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{tiktok_post_id, youtube_video_id};
    use std::collections::HashSet;

    #[test]
    fn counts_follow_the_id_rule_and_ids_are_unique() {
        let g = Gen { seed: 1, base: "http://sim", expires: 0 };
        for n in [0u64, 1, 2, 49, 5000] {
            let p = g.tiktok(tiktok_post_id(TikTokScenario::Normal, n));
            assert_eq!(p.total_comments() as u64, n);
            let y = g.youtube(&youtube_video_id(YouTubeScenario::Normal, n));
            assert_eq!(y.total_comments() as u64, n);
            for post in [p, y] {
                let mut ids = HashSet::new();
                for c in &post.comments {
                    assert!(ids.insert(c.id.clone()));
                    for r in &c.replies {
                        assert!(ids.insert(r.id.clone()));
                    }
                }
            }
        }
        let big = g.tiktok(tiktok_post_id(TikTokScenario::Normal, 5000));
        assert_eq!(big.comments[0].replies.len(), 130);
        assert!(big.comments.iter().any(|c| c.author_handle.is_none()));
        assert!(big.comments.iter().any(|c| !c.images.is_empty()));
    }

    #[test]
    fn generation_is_deterministic_per_seed() {
        let a = Gen { seed: 7, base: "http://sim", expires: 0 }.tiktok(tiktok_post_id(TikTokScenario::Normal, 300));
        let b = Gen { seed: 7, base: "http://sim", expires: 0 }.tiktok(tiktok_post_id(TikTokScenario::Normal, 300));
        let c = Gen { seed: 8, base: "http://sim", expires: 0 }.tiktok(tiktok_post_id(TikTokScenario::Normal, 300));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn rounding() {
        assert_eq!(rounded(999), 999);
        assert_eq!(rounded(1234), 1200);
        assert_eq!(rounded(12_345_678), 12_000_000);
    }
}
