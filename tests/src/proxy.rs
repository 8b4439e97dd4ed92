//! A TCP proxy the tests control, placed between cova and a backend: it can cut every open
//! connection, refuse new ones, delay traffic, partition the network (bytes silently
//! dropped both ways, connections left open, as when packets stop arriving), or stall the
//! backend (bytes held, connections open and acknowledged, as when its process is stopped), to
//! check how cova behaves and recovers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};

pub struct Proxy {
    pub addr: SocketAddr,
    cut: broadcast::Sender<()>,
    refuse: Arc<AtomicBool>,
    delay_ms: Arc<AtomicU64>,
    partition: watch::Sender<bool>,
    stall: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn spawn(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let (cut, _) = broadcast::channel(4);
        let refuse = Arc::new(AtomicBool::new(false));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (partition, _) = watch::channel(false);
        let (stall, _) = watch::channel(false);
        let (cut_tx, refuse_flag, delay, parted, stalled) =
            (cut.clone(), refuse.clone(), delay_ms.clone(), partition.clone(), stall.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if refuse_flag.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut stop = cut_tx.subscribe();
                let (delay, mut parted, stalled) = (delay.clone(), parted.subscribe(), stalled.subscribe());
                tokio::spawn(async move {
                    if *parted.borrow_and_update() {
                        // The connection's packets vanish: nothing reaches the backend, and
                        // once the network is back, the connection (never set up) is gone.
                        black_hole(client, parted, stop).await;
                        return;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else { return };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let lost = Arc::new(AtomicBool::new(false));
                    tokio::select! {
                        _ = pipe(cr, sw, (delay.clone(), parted.clone(), stalled.clone()), lost.clone()) => {}
                        _ = pipe(sr, cw, (delay, parted, stalled), lost) => {}
                        _ = stop.recv() => {}
                    }
                });
            }
        });
        Self { addr, cut, refuse, delay_ms, partition, stall, task }
    }

    /// Drops every open connection at once (both directions).
    pub fn cut(&self) {
        let _ = self.cut.send(());
    }

    /// While true, new connections are accepted and closed at once.
    pub fn refuse(&self, on: bool) {
        self.refuse.store(on, Ordering::SeqCst);
    }

    /// Delay added before forwarding each chunk.
    pub fn delay(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// While true, the network between cova and the backend is partitioned: every byte either
    /// side sends is dropped without a word, open connections stay open and new ones are
    /// accepted but lead nowhere. When it ends, the connections that lost bytes are closed,
    /// as their TCP stacks would have given them up; the others carry on.
    pub fn partition(&self, on: bool) {
        self.partition.send_replace(on);
    }

    /// While true, the backend is stalled: what either side sends is accepted and held, open
    /// connections stay open, and nothing is answered; when it ends, the held bytes go on and
    /// every connection carries on where it was.
    pub fn stall(&self, on: bool) {
        self.stall.send_replace(on);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

/// Reads and drops what a connection opened during a partition sends, until the partition ends
/// (then closes it) or the proxy cuts everything.
async fn black_hole(mut client: TcpStream, mut parted: watch::Receiver<bool>, mut stop: broadcast::Receiver<()>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            read = client.read(&mut buf) => if matches!(read, Ok(0) | Err(_)) { return },
            changed = parted.changed() => if changed.is_err() || !*parted.borrow() { return },
            _ = stop.recv() => return,
        }
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    (delay, mut parted, mut stalled): (Arc<AtomicU64>, watch::Receiver<bool>, watch::Receiver<bool>),
    lost: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = parted.changed() => {
                // The network is back: a connection that lost bytes is given up.
                if changed.is_err() || (!*parted.borrow() && lost.load(Ordering::SeqCst)) {
                    return;
                }
                continue;
            }
        };
        if *parted.borrow() {
            lost.store(true, Ordering::SeqCst);
            continue;
        }
        if lost.load(Ordering::SeqCst) {
            return;
        }
        if stalled.wait_for(|on| !on).await.is_err() {
            return;
        }
        let ms = delay.load(Ordering::SeqCst);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The host:port of a backend URL, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`.
pub fn upstream_of(url: &str) -> SocketAddr {
    let parsed = url::Url::parse(url).expect("backend URL");
    let host = parsed.host_str().expect("host");
    let port = parsed.port_or_known_default().unwrap_or(match parsed.scheme() {
        "amqp" => 5672,
        "redis" => 6379,
        _ => 5432,
    });
    let host = if host == "localhost" { "127.0.0.1" } else { host };
    format!("{host}:{port}").parse().expect("socket address")
}

/// The same URL with its host and port replaced by the proxy's.
pub fn through(url: &str, proxy: &Proxy) -> String {
    let mut parsed = url::Url::parse(url).expect("backend URL");
    let _ = parsed.set_host(Some("127.0.0.1"));
    let _ = parsed.set_port(Some(proxy.addr.port()));
    parsed.to_string()
}
