//! What clients get when they break HTTP itself: malformed request heads and bodies that
//! arrive too slowly are the client's fault, answered with a 4xx and the usual
//! `{detail, code}` body (sent over raw TCP: an HTTP client would refuse to send them).

use cova_tests::spawn_app_with;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends raw bytes and reads the answer until the server closes or 5 s pass.
async fn raw(addr: &str, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

fn body_of(answer: &str) -> serde_json::Value {
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not a JSON body ({e}): {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_a_4xx_with_the_catalogue_body() {
    let app = spawn_app_with(|_| {}).await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let huge_line = format!("GET /api/v1/usage?{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(140_000));
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "NUL in a header",
            b"GET /api/v1/usage HTTP/1.1\r\nHost: x\r\nX-Thing: a\0b\r\n\r\n".to_vec(),
            400,
            "validation_error",
        ),
        (
            "Content-Length with Transfer-Encoding",
            b"POST /api/v1/metadata HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_vec(),
            400,
            "validation_error",
        ),
        (
            "two Content-Lengths",
            b"POST /api/v1/metadata HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}".to_vec(),
            400,
            "validation_error",
        ),
        ("a request line over 128 KiB", huge_line.into_bytes(), 431, "headers_too_large"),
    ];
    for (what, request, status, code) in cases {
        let (got, answer) = raw(&addr, &request).await;
        assert_eq!(got, status, "{what}: {answer}");
        let body = body_of(&answer);
        assert_eq!(body["code"], code, "{what}");
        assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()), "{what}");
    }
    // The connection-level refusals leave the server serving.
    let (status, _) = raw(&addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert_eq!(status, 200);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_too_slowly_is_408_not_503() {
    let app = spawn_app_with(|c| c.http.body_timeout_ms = 500).await;
    let (_, token) = app.integrator().await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /api/v1/metadata HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n{{\"url\":"
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert_eq!(body_of(&answer)["code"], "request_timeout");
    app.stop().await;
}
