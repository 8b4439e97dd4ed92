//! The media store: images cova keeps (post covers, author avatars, comment images), stored
//! once per content (the key is the SHA-256 of the bytes) behind one interface over the local
//! filesystem (the embedded default) and S3-compatible storage (S3, MinIO, Ceph), chosen by
//! URL scheme. The type of a file is sniffed from its bytes, never taken from upstream.
//!
//! Also here: the guarded downloads of platform images ([`fetch`]) and the catalogue that
//! gives each image an account can open an unguessable id ([`catalog`]).

pub mod catalog;
mod fetch;
mod sniff;

pub use catalog::{KeepError, Media, Pending, Prefetcher};
pub use fetch::{FetchError, Fetcher};
pub use sniff::{ImageType, sniff};

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, PutPayload};
use std::ops::Range;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("media store configuration: {0}")]
    Config(String),
    #[error("not an image cova keeps (JPEG, PNG, GIF, WebP, AVIF)")]
    NotAnImage,
    #[error("the file is larger than {0} bytes")]
    TooLarge(usize),
    #[error("not in the media store")]
    NotFound,
    /// The store is unreachable or failed: worth another try.
    #[error("media store: {0}")]
    Store(String),
}

impl From<object_store::Error> for MediaError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { .. } => MediaError::NotFound,
            other => MediaError::Store(other.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, MediaError>;

/// How long an S3 request keeps being retried, and how long a connection may take.
const STORE_RETRY_BOUND: std::time::Duration = std::time::Duration::from_secs(5);
const STORE_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Where media live and how to reach them.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// `file:///var/lib/cova/media`, a plain directory path, or `s3://bucket/prefix`.
    pub url: String,
    /// S3: an endpoint other than AWS (MinIO, Ceph, a test server).
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// S3 over plain http (a local MinIO or test server).
    pub allow_http: bool,
    /// Largest file accepted.
    pub max_bytes: usize,
}

/// A stored file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// `sha256/<hex>`: the same bytes always get the same key.
    pub key: String,
    pub size: usize,
    pub image: ImageType,
}

/// An image checked and named, not stored yet ([`MediaStore::prepare`]).
pub struct Prepared {
    pub stored: Stored,
    bytes: Bytes,
}

#[derive(Clone)]
pub struct MediaStore {
    store: Arc<dyn ObjectStore>,
    /// Prefix inside the bucket (S3); empty for the filesystem, whose root is the directory.
    prefix: String,
    max_bytes: usize,
}

impl std::fmt::Debug for MediaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaStore").field("store", &self.store.to_string()).field("prefix", &self.prefix).finish()
    }
}

impl MediaStore {
    /// A store in memory, for a process whose roles never keep or serve images (the notifier,
    /// the ai-worker): `media.*` is then not even read, so it cannot stop them.
    pub fn unused() -> Self {
        Self { store: Arc::new(object_store::memory::InMemory::new()), prefix: String::new(), max_bytes: 0 }
    }

    /// The store `media.*` configures.
    pub fn from_config(cfg: &cova_config::MediaConfig) -> Result<Self> {
        use secrecy::ExposeSecret;
        Self::open(&StoreOptions {
            url: cfg.url.clone(),
            endpoint: cfg.s3_endpoint.clone(),
            region: cfg.s3_region.clone(),
            access_key_id: cfg.s3_access_key_id.clone(),
            secret_access_key: cfg.s3_secret_access_key.as_ref().map(|s| s.expose_secret().to_owned()),
            allow_http: cfg.s3_allow_http,
            max_bytes: cfg.max_bytes,
        })
    }

    pub fn open(options: &StoreOptions) -> Result<Self> {
        let config = |e: object_store::Error| MediaError::Config(e.to_string());
        let (store, prefix): (Arc<dyn ObjectStore>, String) = match options.url.split_once("://") {
            Some(("s3", rest)) => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(MediaError::Config("an s3:// URL needs a bucket: s3://bucket/prefix".into()));
                }
                // Requests wait on the store: one that is down answers within seconds (then
                // 503), not after the client's default three minutes of retries.
                let retry = object_store::RetryConfig {
                    max_retries: 2,
                    retry_timeout: STORE_RETRY_BOUND,
                    ..object_store::RetryConfig::default()
                };
                let client = object_store::ClientOptions::new().with_connect_timeout(STORE_CONNECT_TIMEOUT);
                let mut builder = object_store::aws::AmazonS3Builder::new()
                    .with_retry(retry)
                    .with_client_options(client)
                    .with_bucket_name(bucket)
                    .with_region(options.region.clone().unwrap_or_else(|| "us-east-1".into()))
                    .with_allow_http(options.allow_http);
                if let Some(endpoint) = &options.endpoint {
                    // Path-style requests: what MinIO, Ceph and test servers answer.
                    builder = builder.with_endpoint(endpoint).with_virtual_hosted_style_request(false);
                }
                if let (Some(id), Some(secret)) = (&options.access_key_id, &options.secret_access_key) {
                    builder = builder.with_access_key_id(id).with_secret_access_key(secret);
                }
                (Arc::new(builder.build().map_err(config)?), prefix.trim_matches('/').to_owned())
            }
            Some(("file", rest)) => (Arc::new(local(rest)?), String::new()),
            Some((scheme, _)) => {
                return Err(MediaError::Config(format!("`{scheme}://` is not a media store; use file:// or s3://")));
            }
            None => (Arc::new(local(&options.url)?), String::new()),
        };
        Ok(Self { store, prefix, max_bytes: options.max_bytes.max(1) })
    }

    fn path(&self, key: &str) -> Path {
        if self.prefix.is_empty() { Path::from(key) } else { Path::from(format!("{}/{key}", self.prefix)) }
    }

    /// Keeps an image: refused when it is not one or too large; stored once per content.
    pub async fn put(&self, bytes: Bytes) -> Result<Stored> {
        let prepared = self.prepare(bytes)?;
        self.keep(prepared).await
    }

    /// Checks an image and names its bytes (their key), without storing them yet: the caller
    /// can record the key first ([`MediaStore::keep`] stores them after).
    pub fn prepare(&self, bytes: Bytes) -> Result<Prepared> {
        if bytes.len() > self.max_bytes {
            return Err(MediaError::TooLarge(self.max_bytes));
        }
        let image = sniff(&bytes).ok_or(MediaError::NotAnImage)?;
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        let key = format!("sha256/{}", hex::encode(digest.as_ref()));
        Ok(Prepared { stored: Stored { key, size: bytes.len(), image }, bytes })
    }

    /// Stores prepared bytes unless the store has them already.
    pub async fn keep(&self, prepared: Prepared) -> Result<Stored> {
        let Prepared { stored, bytes } = prepared;
        let path = self.path(&stored.key);
        match self.store.head(&path).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => {
                self.store.put(&path, PutPayload::from_bytes(bytes)).await?;
            }
            Err(e) => return Err(e.into()),
        }
        Ok(stored)
    }

    /// The size of a stored file.
    pub async fn size(&self, key: &str) -> Result<u64> {
        Ok(self.store.head(&self.path(key)).await?.size)
    }

    /// The bytes of a stored file (or of `range` of it), as a stream: a large file is never
    /// held in memory whole.
    pub async fn stream(&self, key: &str, range: Option<Range<u64>>) -> Result<BoxStream<'static, Result<Bytes>>> {
        use futures::StreamExt;
        let options = GetOptions { range: range.map(GetRange::Bounded), ..GetOptions::default() };
        let got = self.store.get_opts(&self.path(key), options).await?;
        Ok(got.into_stream().map(|chunk| chunk.map_err(MediaError::from)).boxed())
    }

    /// Deletes a stored file; deleting one that is gone is not an error.
    /// Whether the store answers: a lookup of a key that does not exist must come back as
    /// "not found" (for `/readyz`).
    pub async fn ping(&self) -> Result<()> {
        match self.store.head(&Path::from("readyz-probe")).await {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn delete(&self, key: &str) -> Result<()> {
        match self.store.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn local(dir: &str) -> Result<object_store::local::LocalFileSystem> {
    std::fs::create_dir_all(dir).map_err(|e| MediaError::Config(format!("creating {dir}: {e}")))?;
    object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| MediaError::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

    fn store(dir: &tempfile::TempDir, max_bytes: usize) -> MediaStore {
        MediaStore::open(&StoreOptions {
            url: format!("file://{}", dir.path().display()),
            max_bytes,
            ..Default::default()
        })
        .expect("store")
    }

    async fn read(store: &MediaStore, key: &str, range: Option<Range<u64>>) -> Vec<u8> {
        let chunks: Vec<Bytes> = store.stream(key, range).await.expect("stream").try_collect().await.expect("read");
        chunks.concat()
    }

    #[tokio::test]
    async fn images_are_kept_once_per_content_and_read_in_ranges() {
        let dir = tempfile::tempdir().expect("dir");
        let store = store(&dir, 1_000);
        let a = store.put(Bytes::from_static(PNG)).await.expect("put");
        let b = store.put(Bytes::from_static(PNG)).await.expect("again");
        assert_eq!(a, b, "the same bytes, the same key");
        assert_eq!((a.image, a.size), (ImageType::Png, PNG.len()));
        assert!(a.key.starts_with("sha256/") && a.key.len() == 7 + 64);
        assert_eq!(read(&store, &a.key, None).await, PNG);
        assert_eq!(read(&store, &a.key, Some(1..4)).await, b"PNG");
        assert_eq!(store.size(&a.key).await.expect("size"), PNG.len() as u64);
        store.delete(&a.key).await.expect("delete");
        store.delete(&a.key).await.expect("deleting twice is fine");
        assert!(matches!(store.stream(&a.key, None).await, Err(MediaError::NotFound)));
    }

    #[tokio::test]
    async fn only_images_within_the_limit() {
        let dir = tempfile::tempdir().expect("dir");
        let store = store(&dir, 16);
        assert!(matches!(store.put(Bytes::from_static(PNG)).await, Err(MediaError::TooLarge(16))));
        let store = self::store(&dir, 1_000);
        assert!(matches!(
            store.put(Bytes::from_static(b"<html>not an image</html>")).await,
            Err(MediaError::NotAnImage)
        ));
    }

    /// Against a real S3-compatible server (`COVA_TEST_S3_ENDPOINT`, bucket created here).
    #[tokio::test]
    #[ignore = "needs an S3-compatible server: run with make test-real"]
    async fn the_same_on_s3() {
        let endpoint = std::env::var("COVA_TEST_S3_ENDPOINT").expect("COVA_TEST_S3_ENDPOINT is set for this test");
        let bucket = format!("cova-test-{}", std::process::id());
        // Test servers accept an unsigned bucket creation.
        let created = std::process::Command::new("curl")
            .args(["-sf", "-X", "PUT", &format!("{endpoint}/{bucket}")])
            .status()
            .expect("curl");
        assert!(created.success(), "creating the bucket");
        let store = MediaStore::open(&StoreOptions {
            url: format!("s3://{bucket}/media"),
            endpoint: Some(endpoint),
            access_key_id: Some("test".into()),
            secret_access_key: Some("test".into()),
            allow_http: true,
            max_bytes: 1_000,
            ..Default::default()
        })
        .expect("store");
        let stored = store.put(Bytes::from_static(PNG)).await.expect("put");
        assert_eq!(store.put(Bytes::from_static(PNG)).await.expect("again"), stored);
        assert_eq!(read(&store, &stored.key, Some(1..4)).await, b"PNG");
        store.delete(&stored.key).await.expect("delete");
        assert!(matches!(store.size(&stored.key).await, Err(MediaError::NotFound)));
    }

    #[test]
    fn store_urls() {
        let s3 = |url: &str| MediaStore::open(&StoreOptions { url: url.into(), max_bytes: 1, ..Default::default() });
        assert!(s3("s3://bucket/prefix").is_ok());
        assert!(matches!(s3("s3:///x"), Err(MediaError::Config(_))));
        assert!(matches!(s3("ftp://x"), Err(MediaError::Config(_))));
    }
}
