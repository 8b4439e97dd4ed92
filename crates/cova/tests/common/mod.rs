//! Running the real `cova` binary from tests: a clean environment with only the given
//! `COVA_*` variables, and roles started with their HTTP address read from the log.

#![allow(dead_code)] // `make bench` includes this module too, and uses a part of it

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub struct Cova {
    pub vars: Vec<(String, String)>,
}

impl Cova {
    /// A process on the backends of `config` (same database, queue and cache, with their
    /// prefixes), plus `extra` settings.
    pub fn sharing(config: &cova_config::Config, extra: &[(&str, String)]) -> Self {
        let backends = [
            ("COVA_DATABASE__URL", config.database.url.clone()),
            ("COVA_QUEUE__URL", config.queue.url.clone()),
            ("COVA_QUEUE__PREFIX", config.queue.prefix.clone()),
            ("COVA_CACHE__URL", config.cache.url.clone()),
            ("COVA_CACHE__PREFIX", config.cache.prefix.clone()),
        ];
        let media = &config.media;
        let s3 = media.s3_endpoint.iter().flat_map(|endpoint| {
            [
                ("COVA_MEDIA__S3_ENDPOINT", endpoint.clone()),
                ("COVA_MEDIA__S3_ALLOW_HTTP", "true".to_owned()),
                ("COVA_MEDIA__S3_ACCESS_KEY_ID", "test".to_owned()),
                ("COVA_MEDIA__S3_SECRET_ACCESS_KEY", "test".to_owned()),
            ]
        });
        let vars = backends
            .into_iter()
            .chain([("COVA_MEDIA__URL", media.url.clone())])
            .chain(s3)
            .chain(extra.iter().cloned())
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        Self { vars }
    }

    /// The value given to the setting `name` (`COVA_…`), if any.
    fn var(&self, name: &str) -> Option<String> {
        self.vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// Deletes the keys these processes left under their prefix on a shared Redis (results and
    /// counts live for days there); nothing to do on the in-process cache.
    pub async fn forget_keys(&self) {
        let (Some(url), Some(prefix)) = (self.var("COVA_CACHE__URL"), self.var("COVA_CACHE__PREFIX")) else { return };
        cova_tests::forget_keys(&cova_config::CacheConfig { url, prefix, ..Default::default() }).await;
    }

    /// Deletes what these processes left on shared backends, once they stopped: the queues and
    /// exchanges under their prefix on RabbitMQ (a consumer still running would declare them
    /// again) and their keys on Redis.
    pub async fn forget(&self) {
        if let (Some(url), Some(prefix)) = (self.var("COVA_QUEUE__URL"), self.var("COVA_QUEUE__PREFIX"))
            && url.starts_with("amqp")
        {
            let cfg = cova_config::QueueConfig { url, prefix, prefetch: 1 };
            let roles = cova_messages::roles::ALL;
            if let Ok(q) = cova_queue::Queue::connect_with(&cfg, roles, cova_messages::event_queues::ALL).await {
                let _ = q.teardown().await;
            }
        }
        self.forget_keys().await;
    }

    /// A process on the test database at `database_url` that reads TikTok from the simulator at
    /// `sim_url` at no pace, its cache and queue keys under `prefix` (on the shared Redis when
    /// `COVA_TEST_CACHE_URL` is set), listening on a port of its own; plus `extra` settings.
    pub fn on_sim(database_url: &str, sim_url: &str, prefix: &str, extra: &[(&str, String)]) -> Self {
        let mut vars: Vec<(String, String)> = [
            ("COVA_DATABASE__URL", database_url.to_owned()),
            ("COVA_HTTP__ADDR", "127.0.0.1:0".to_owned()),
            ("COVA_CACHE__PREFIX", prefix.to_owned()),
            ("COVA_QUEUE__PREFIX", prefix.to_owned()),
            ("COVA_PLATFORMS__TIKTOK__WEB_BASE_URL", sim_url.to_owned()),
            ("COVA_PLATFORMS__TIKTOK__REQUESTS_PER_SECOND", "0".to_owned()),
        ]
        .into_iter()
        .chain(extra.iter().cloned())
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Ok(url) = std::env::var("COVA_TEST_CACHE_URL") {
            vars.push(("COVA_CACHE__URL".into(), url));
        }
        Self { vars }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cova"));
        cmd.args(args).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
        if !self.vars.iter().any(|(k, _)| k == "COVA_MEDIA__URL") {
            // Never the default `data/media` under the crate.
            let dir = std::env::temp_dir().join("cova-test-media").join(format!("p{}", std::process::id()));
            cmd.env("COVA_MEDIA__URL", dir);
        }
        // Test databases on PostgreSQL share one sealing key (an embedded one keeps its own file).
        cmd.env("COVA_DATABASE__ENCRYPTION_KEYS", cova_testdb::TEST_ENCRYPTION_KEY);
        // Tests run side by side: a port of their own (read from the log when needed).
        cmd.env("COVA_METRICS__ADDR", "127.0.0.1:0");
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("cova runs")
    }

    /// Starts a role; for HTTP roles also returns the base URL from the "listening" log line.
    pub fn start(&self, role: &str, http: bool) -> (Child, Option<String>) {
        let (child, lines) = self.spawn_watching(role, "cova listening on ");
        let base = http.then(|| {
            let rest = lines.recv_timeout(Duration::from_secs(30)).expect("cova logs its address");
            rest.chars().take_while(|c| *c != '"').collect()
        });
        (child, base)
    }

    /// Starts a role and waits (30 s at most) for a log line containing `marker`.
    pub fn start_until(&self, role: &str, marker: &str) -> Child {
        let (mut child, lines) = self.spawn_watching(role, marker);
        if lines.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!("cova {role} did not log `{marker}` within 30 s");
        }
        child
    }

    /// Starts an HTTP role and keeps every line it logs; returns the base URL too.
    pub fn start_logging(&self, role: &str) -> (Child, String, Log) {
        let log = Log::default();
        let (child, lines) = self.spawn_logging(role, "cova listening on ", Some(log.clone()));
        let rest = lines.recv_timeout(Duration::from_secs(30)).expect("cova logs its address");
        (child, rest.chars().take_while(|c| *c != '"').collect(), log)
    }

    /// Starts a role, waits for a log line containing `marker`, and keeps every line it logs.
    pub fn start_collecting(&self, role: &str, marker: &str) -> (Child, Log) {
        let log = Log::default();
        let (mut child, lines) = self.spawn_logging(role, marker, Some(log.clone()));
        if lines.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            panic!("cova {role} did not log `{marker}` within 30 s");
        }
        (child, log)
    }

    /// Spawns a role whose log is drained (so it never blocks on a full pipe); the text after
    /// `marker` on each line that holds it is sent to the receiver.
    fn spawn_watching(&self, role: &str, marker: &str) -> (Child, std::sync::mpsc::Receiver<String>) {
        self.spawn_logging(role, marker, None)
    }

    fn spawn_logging(&self, role: &str, marker: &str, keep: Option<Log>) -> (Child, std::sync::mpsc::Receiver<String>) {
        let mut child = self.command(&[role]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        let marker = marker.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split(marker.as_str()).nth(1) {
                    let _ = tx.send(rest.to_owned());
                }
                if let Some(log) = &keep {
                    log.push(line);
                }
            }
        });
        (child, rx)
    }
}

/// Every line a process logged so far.
#[derive(Clone, Default)]
pub struct Log(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        if let Ok(mut lines) = self.0.lock() {
            lines.push(line);
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The metrics listener's base URL (`http://addr`) from a process' log, once it is there.
pub async fn metrics_base(log: &Log) -> String {
    const MARKER: &str = "cova metrics on ";
    let rest = cova_tests::until("the metrics address in the log", async || {
        log.lines().iter().find_map(|l| l.split(MARKER).nth(1).map(str::to_owned))
    })
    .await;
    let url: String = rest.chars().take_while(|c| *c != '"').collect();
    url.trim_end_matches("/metrics").to_owned()
}

/// The value of one series (`name{labels}` exactly as exposed), 0 when absent.
pub fn series(exposition: &str, series: &str) -> f64 {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum()
}

/// The sum of every series of a metric whose labels contain `label` (e.g. `outcome="ok"`).
pub fn sum_where(exposition: &str, name: &str, label: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
