//! A minimal SMTP receiver (RFC 5321) for the mail cova sends: plain SMTP, no STARTTLS, no
//! AUTH. Every accepted message is kept as received, and [`SentMail`] decodes what tests check:
//! the subject and the text body.

use crate::history::Ring;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Largest message accepted (also advertised as `SIZE`).
const MAX_MESSAGE: usize = 10 * 1024 * 1024;
/// Lines are read in chunks of at most this size, so a client cannot grow memory without bound.
const MAX_LINE: u64 = 64 * 1024;
/// More recipients than any real mail has; bounds memory.
const MAX_RECIPIENTS: usize = 1000;
/// Multipart nesting deeper than this is not searched for a text part.
const MAX_DEPTH: u8 = 8;

/// One message as the receiver accepted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SentMail {
    /// The `MAIL FROM` address (empty for a null sender).
    pub from: String,
    /// The `RCPT TO` addresses, in order.
    pub to: Vec<String>,
    /// Headers and body as transmitted (dot-stuffing undone, lines ending in CR LF).
    pub data: String,
}

impl SentMail {
    /// The first header called `name` (any case), unfolded, not decoded.
    pub fn header(&self, name: &str) -> Option<String> {
        let (headers, _) = split_message(&self.data);
        header(&headers, name).map(str::to_owned)
    }

    /// The `Subject` with RFC 2047 encoded words decoded; empty when there is none.
    pub fn subject(&self) -> String {
        self.header("subject").map(|s| decode_encoded_words(&s)).unwrap_or_default()
    }

    /// The text body, transfer encoding (quoted-printable, base64) undone: the message's body
    /// if it is a single part, else its first `text/plain` part.
    pub fn body_text(&self) -> String {
        let (headers, body) = split_message(&self.data);
        plain_text(&headers, body, 0).unwrap_or_else(|| decode_body(&headers, body))
    }
}

/// Accepts connections until the task is aborted; connections end with it.
pub(crate) async fn run(listener: TcpListener, mails: Arc<Mutex<Ring<SentMail>>>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = listener.accept().await;
        // Reap finished connections so the set does not grow.
        while connections.try_join_next().is_some() {}
        match accepted {
            Ok((stream, _)) => {
                let mails = mails.clone();
                connections.spawn(async move {
                    // A client that hangs up mid-dialogue is no error of the receiver's.
                    let _ = session(stream, &mails).await;
                });
            }
            // Out of file descriptors and the like: wait instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// What the client sent after `DATA`.
enum Data {
    Message(Vec<u8>),
    TooBig,
    Closed,
}

async fn session(stream: TcpStream, mails: &Mutex<Ring<SentMail>>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    write.write_all(b"220 cova-sim ESMTP\r\n").await?;
    let mut from: Option<String> = None;
    let mut to: Vec<String> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if (&mut read).take(MAX_LINE).read_until(b'\n', &mut line).await? == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(trim_eol(&line)).into_owned();
        let (verb, arg) = match text.split_once(' ') {
            Some((verb, arg)) => (verb, arg.trim()),
            None => (text.as_str(), ""),
        };
        let reply: &str = match verb.to_ascii_uppercase().as_str() {
            "EHLO" => {
                from = None;
                to.clear();
                // No STARTTLS and no AUTH: clients then send in plain text without logging in.
                "250-cova-sim\r\n250-8BITMIME\r\n250 SIZE 10485760\r\n"
            }
            "HELO" => {
                from = None;
                to.clear();
                "250 cova-sim\r\n"
            }
            "MAIL" => match mailbox(arg, "FROM:") {
                None => "501 5.5.4 Syntax: MAIL FROM:<address>\r\n",
                Some(_) if from.is_some() => "503 5.5.1 Sender already given\r\n",
                Some((_, params)) if declared_size(params).is_some_and(|s| s > MAX_MESSAGE as u64) => {
                    "552 5.3.4 Message size exceeds fixed maximum message size\r\n"
                }
                Some((address, _)) => {
                    from = Some(address);
                    "250 2.1.0 Ok\r\n"
                }
            },
            "RCPT" => match mailbox(arg, "TO:") {
                _ if from.is_none() => "503 5.5.1 Need MAIL command\r\n",
                Some((address, _)) if !address.is_empty() => {
                    if to.len() >= MAX_RECIPIENTS {
                        "452 4.5.3 Too many recipients\r\n"
                    } else {
                        to.push(address);
                        "250 2.1.5 Ok\r\n"
                    }
                }
                _ => "501 5.5.4 Syntax: RCPT TO:<address>\r\n",
            },
            "DATA" => {
                if from.is_none() || to.is_empty() {
                    "503 5.5.1 Need RCPT command\r\n"
                } else {
                    write.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n").await?;
                    let data = read_data(&mut read).await?;
                    let sender = from.take().unwrap_or_default();
                    let recipients = std::mem::take(&mut to);
                    match data {
                        Data::Closed => return Ok(()),
                        Data::TooBig => "552 5.3.4 Message too big\r\n",
                        Data::Message(bytes) => {
                            let mail = SentMail {
                                from: sender,
                                to: recipients,
                                data: String::from_utf8_lossy(&bytes).into_owned(),
                            };
                            mails.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(mail);
                            "250 2.0.0 Ok: queued\r\n"
                        }
                    }
                }
            }
            "RSET" => {
                from = None;
                to.clear();
                "250 2.0.0 Ok\r\n"
            }
            "NOOP" => "250 2.0.0 Ok\r\n",
            "QUIT" => {
                write.write_all(b"221 2.0.0 Bye\r\n").await?;
                write.shutdown().await?;
                return Ok(());
            }
            _ => "502 5.5.2 Command not recognized\r\n",
        };
        write.write_all(reply.as_bytes()).await?;
    }
}

/// Reads the message after `DATA` up to the line holding a single `.`, undoing dot-stuffing.
/// A message past the cap is read to its end and dropped.
async fn read_data<R: AsyncBufRead + Unpin>(read: &mut R) -> std::io::Result<Data> {
    let mut data = Vec::new();
    let mut too_big = false;
    let mut line = Vec::new();
    // Whether the next chunk begins a line (a chunk may be part of an overlong line).
    let mut at_start = true;
    loop {
        line.clear();
        if (&mut *read).take(MAX_LINE).read_until(b'\n', &mut line).await? == 0 {
            return Ok(Data::Closed);
        }
        let complete = line.ends_with(b"\n");
        let mut content: &[u8] = if complete { trim_eol(&line) } else { &line };
        if at_start && complete && content == b"." {
            break;
        }
        if at_start && content.first() == Some(&b'.') {
            content = &content[1..];
        }
        if !too_big {
            data.extend_from_slice(content);
            if complete {
                data.extend_from_slice(b"\r\n");
            }
            if data.len() > MAX_MESSAGE {
                too_big = true;
                data = Vec::new();
            }
        }
        at_start = complete;
    }
    Ok(if too_big { Data::TooBig } else { Data::Message(data) })
}

/// A line without its CR LF or bare LF.
fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The address of `FROM:<a@b> PARAMS` (with `keyword` = `FROM:`, any case) and its parameters.
fn mailbox<'a>(arg: &'a str, keyword: &str) -> Option<(String, &'a str)> {
    let head = arg.get(..keyword.len())?;
    if !head.eq_ignore_ascii_case(keyword) {
        return None;
    }
    let rest = arg.get(keyword.len()..)?.trim_start();
    let (address, params) = match rest.strip_prefix('<') {
        Some(rest) => rest.split_once('>')?,
        // Some clients leave out the angle brackets.
        None => rest.split_once(' ').unwrap_or((rest, "")),
    };
    Some((address.trim().to_owned(), params.trim()))
}

/// The `SIZE=` parameter of `MAIL FROM`.
fn declared_size(params: &str) -> Option<u64> {
    params.split_whitespace().find_map(|p| {
        let (name, value) = p.split_once('=')?;
        if name.eq_ignore_ascii_case("size") { value.parse().ok() } else { None }
    })
}

/// Headers (unfolded) and body of a message or body part.
fn split_message(message: &str) -> (Vec<(String, String)>, &str) {
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut offset = 0;
    for line in message.split_inclusive('\n') {
        offset += line.len();
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return (headers, &message[offset..]);
        }
        if line.starts_with([' ', '\t']) {
            // A folded header continues the previous one; the leading blank stays.
            if let Some((_, value)) = headers.last_mut() {
                value.push_str(line);
            }
        } else if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    (headers, "")
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim())
}

/// A parameter of a header value such as `multipart/alternative; boundary="b1"`.
fn parameter(value: &str, name: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|p| {
        let (n, v) = p.split_once('=')?;
        let v = v.trim();
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v).to_owned())
    })
}

/// The decoded text of the first `text/plain` part (a part without a type is plain text).
fn plain_text(headers: &[(String, String)], body: &str, depth: u8) -> Option<String> {
    let content_type = header(headers, "content-type").unwrap_or("text/plain");
    let media = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if media.starts_with("multipart/") {
        if depth >= MAX_DEPTH {
            return None;
        }
        let boundary = parameter(content_type, "boundary")?;
        return parts(body, &boundary).into_iter().find_map(|part| {
            let (headers, body) = split_message(part);
            plain_text(&headers, body, depth + 1)
        });
    }
    (media == "text/plain").then(|| decode_body(headers, body))
}

/// The parts of a multipart body, without preamble, epilogue or delimiter lines.
fn parts<'a>(body: &'a str, boundary: &str) -> Vec<&'a str> {
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut start: Option<usize> = None;
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        let rest = line.trim_end().strip_prefix(delimiter.as_str());
        if let Some(rest) = rest
            && (rest.is_empty() || rest == "--")
        {
            if let Some(s) = start {
                // The line break before a delimiter belongs to the delimiter.
                let part = &body[s..offset];
                let part = part.strip_suffix('\n').unwrap_or(part);
                parts.push(part.strip_suffix('\r').unwrap_or(part));
            }
            if rest == "--" {
                return parts;
            }
            start = Some(offset + line.len());
        }
        offset += line.len();
    }
    // No closing delimiter: the last part runs to the end.
    if let Some(s) = start {
        parts.push(&body[s..]);
    }
    parts
}

/// A body with its `Content-Transfer-Encoding` undone, as UTF-8.
fn decode_body(headers: &[(String, String)], body: &str) -> String {
    let encoding = header(headers, "content-transfer-encoding").map(str::to_ascii_lowercase);
    match encoding.as_deref() {
        Some("quoted-printable") => String::from_utf8_lossy(&decode_quoted_printable(body)).into_owned(),
        Some("base64") => {
            let compact: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            match STANDARD.decode(compact.as_bytes()) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(_) => body.to_owned(),
            }
        }
        _ => body.to_owned(),
    }
}

fn hex_value(c: u8) -> Option<u8> {
    char::from(c).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// The byte written as two hex digits at `at`.
fn hex_byte(bytes: &[u8], at: usize) -> Option<u8> {
    let high = hex_value(*bytes.get(at)?)?;
    let low = hex_value(*bytes.get(at + 1)?)?;
    Some((high << 4) | low)
}

/// Quoted-printable (RFC 2045): `=XX` is a byte, `=` at the end of a line a soft line break.
fn decode_quoted_printable(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'=' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let rest = &bytes[i + 1..];
        // Transport may leave blanks between the `=` and the line break.
        let blanks = rest.iter().take_while(|c| **c == b' ' || **c == b'\t').count();
        let after = &rest[blanks..];
        if after.starts_with(b"\r\n") {
            i += 1 + blanks + 2;
        } else if after.starts_with(b"\n") {
            i += 1 + blanks + 1;
        } else if after.is_empty() {
            i = bytes.len();
        } else if let Some(byte) = hex_byte(bytes, i + 1) {
            out.push(byte);
            i += 3;
        } else {
            // Not valid quoted-printable: keep the `=` as it is.
            out.push(b'=');
            i += 1;
        }
    }
    out
}

/// `Q` encoding of RFC 2047: like quoted-printable, with `_` for a space.
fn decode_q(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], hex_byte(bytes, i + 1)) {
            (b'_', _) => out.push(b' '),
            (b'=', Some(byte)) => {
                out.push(byte);
                i += 2;
            }
            (b, _) => out.push(b),
        }
        i += 1;
    }
    out
}

/// An encoded word after its `=?`: charset (lowercase), decoded bytes and the length used
/// (through the closing `?=`).
fn encoded_word(s: &str) -> Option<(String, Vec<u8>, usize)> {
    let (charset, after) = s.split_once('?')?;
    let (encoding, after) = after.split_once('?')?;
    let end = after.find("?=")?;
    let text = &after[..end];
    if charset.is_empty() || [charset, encoding, text].iter().any(|p| p.contains(char::is_whitespace)) {
        return None;
    }
    let bytes = match encoding {
        "Q" | "q" => decode_q(text),
        "B" | "b" => STANDARD.decode(text).or_else(|_| STANDARD_NO_PAD.decode(text)).ok()?,
        _ => return None,
    };
    let used = charset.len() + 1 + encoding.len() + 1 + end + 2;
    // RFC 2231 allows a language after the charset: `utf-8*en`.
    let charset = charset.split('*').next().unwrap_or_default().to_ascii_lowercase();
    Some((charset, bytes, used))
}

fn decode_charset(bytes: &[u8], charset: &str) -> String {
    match charset {
        "iso-8859-1" | "latin1" => bytes.iter().map(|b| char::from(*b)).collect(),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn flush(out: &mut String, pending: &mut Vec<u8>, charset: &str) {
    if !pending.is_empty() {
        out.push_str(&decode_charset(pending, charset));
        pending.clear();
    }
}

/// Decodes RFC 2047 encoded words (`=?utf-8?q?…?=`, `=?utf-8?b?…?=`) in a header value.
fn decode_encoded_words(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    // Bytes of adjacent encoded words are decoded together: encoders may split a character
    // between two words.
    let mut pending: Vec<u8> = Vec::new();
    let mut charset = String::new();
    let mut after_word = false;
    while let Some(start) = rest.find("=?") {
        let before = &rest[..start];
        let candidate = &rest[start + 2..];
        match encoded_word(candidate) {
            Some((word_charset, bytes, used)) => {
                // Blanks between two encoded words are not part of the text (RFC 2047 §6.2).
                if !(after_word && before.chars().all(char::is_whitespace)) {
                    flush(&mut out, &mut pending, &charset);
                    out.push_str(before);
                } else if word_charset != charset {
                    flush(&mut out, &mut pending, &charset);
                }
                pending.extend_from_slice(&bytes);
                charset = word_charset;
                after_word = true;
                rest = &candidate[used..];
            }
            None => {
                flush(&mut out, &mut pending, &charset);
                out.push_str(&rest[..start + 2]);
                rest = candidate;
                after_word = false;
            }
        }
    }
    flush(&mut out, &mut pending, &charset);
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

    fn mail(data: &str) -> SentMail {
        SentMail { from: "cova@cova.test".into(), to: vec!["ann@example.com".into()], data: data.into() }
    }

    #[test]
    fn decodes_quoted_printable() {
        let text = "Caf=C3=A9 =3D 1 and a very long link https://cova.test/verify?token=3Dab=\r\ncd done=\r\n";
        assert_eq!(
            String::from_utf8_lossy(&decode_quoted_printable(text)),
            "Café = 1 and a very long link https://cova.test/verify?token=abcd done"
        );
        assert_eq!(decode_quoted_printable("soft =  \nbreak"), b"soft break");
        assert_eq!(decode_quoted_printable("bad =ZZ and end ="), b"bad =ZZ and end ");
        let qp = mail(
            "From: cova@cova.test\r\nSubject: Hi\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Transfer-Encoding: quoted-printable\r\n\r\nGr=C3=BC=C3=9Fe,\r\nsee https://cova.test/a?b=3Dc=\r\n&d=3De\r\n",
        );
        assert_eq!(qp.body_text(), "Grüße,\r\nsee https://cova.test/a?b=c&d=e\r\n");
    }

    #[test]
    fn decodes_a_base64_body() {
        let m = mail(
            "Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Transfer-Encoding: base64\r\n\r\nSGVsbG8sDQp0aGlz\r\nIGlzIGJhc2U2NC4NCg==\r\n",
        );
        assert_eq!(m.body_text(), "Hello,\r\nthis is base64.\r\n");
        let plain = mail("Subject: x\r\n\r\nJust text.\r\n");
        assert_eq!(plain.body_text(), "Just text.\r\n");
    }

    #[test]
    fn takes_the_plain_part_of_a_multipart_message() {
        let m = mail(concat!(
            "Subject: x\r\n",
            "MIME-Version: 1.0\r\n",
            "Content-Type: multipart/alternative;\r\n",
            " boundary=\"b1=_x\"\r\n",
            "\r\n",
            "This is a multi-part message.\r\n",
            "--b1=_x\r\n",
            "Content-Type: text/html; charset=utf-8\r\n",
            "\r\n",
            "<p>HTML</p>\r\n",
            "--b1=_x\r\n",
            "Content-Type: text/plain; charset=utf-8\r\n",
            "Content-Transfer-Encoding: quoted-printable\r\n",
            "\r\n",
            "Plain =E2=9C=93\r\n",
            "line two\r\n",
            "--b1=_x--\r\n",
            "epilogue\r\n",
        ));
        assert_eq!(m.body_text(), "Plain ✓\r\nline two");
        let nested = mail(concat!(
            "Content-Type: multipart/mixed; boundary=outer\r\n",
            "\r\n",
            "--outer\r\n",
            "Content-Type: multipart/alternative; boundary=inner\r\n",
            "\r\n",
            "--inner\r\n",
            "Content-Type: text/plain\r\n",
            "Content-Transfer-Encoding: base64\r\n",
            "\r\n",
            "bmVzdGVk\r\n",
            "--inner--\r\n",
            "--outer--\r\n",
        ));
        assert_eq!(nested.body_text(), "nested");
    }

    #[test]
    fn decodes_the_subject() {
        let subject = |s: &str| mail(&format!("From: a@b\r\nSubject: {s}\r\n\r\nbody\r\n")).subject();
        assert_eq!(subject("Plain subject"), "Plain subject");
        assert_eq!(subject("=?utf-8?q?Best=C3=A4tige_deine_E-Mail?="), "Bestätige deine E-Mail");
        assert_eq!(subject("=?UTF-8?B?R3LDvMOfZSBhdXMgS8O2bG4g4oCUIOKckw==?="), "Grüße aus Köln — ✓");
        // Folded, two words joined without the blank between them, text around them kept.
        assert_eq!(subject("Re: =?utf-8?q?caf=C3?=\r\n =?utf-8?q?=A9?= now"), "Re: café now");
        assert_eq!(subject("=?utf-8?x?bad?= stays"), "=?utf-8?x?bad?= stays");
        assert_eq!(mail("From: a@b\r\n\r\nbody").subject(), "");
    }

    /// A client's end of the dialogue.
    struct Client {
        read: BufReader<OwnedReadHalf>,
        write: OwnedWriteHalf,
    }

    impl Client {
        async fn say(&mut self, line: &str) -> String {
            self.write.write_all(line.as_bytes()).await.expect("write");
            reply(&mut self.read).await
        }
    }

    async fn reply<R: AsyncBufRead + Unpin>(read: &mut R) -> String {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            assert!(read.read_line(&mut line).await.expect("read") > 0, "closed after {all:?}");
            all.push_str(&line);
            // The last line of a reply has a blank after the code.
            if line.as_bytes().get(3) != Some(&b'-') {
                return all;
            }
        }
    }

    #[tokio::test]
    async fn speaks_smtp_over_tcp() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mails = Arc::new(Mutex::new(Ring::new(10)));
        let server = tokio::spawn(run(listener, mails.clone()));
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (read, write) = stream.into_split();
        let mut client = Client { read: BufReader::new(read), write };
        assert!(reply(&mut client.read).await.starts_with("220 cova-sim ESMTP"));
        let ehlo = client.say("EHLO client.test\r\n").await;
        assert!(ehlo.starts_with("250-cova-sim\r\n") && ehlo.contains("8BITMIME"), "{ehlo}");
        assert!(!ehlo.contains("STARTTLS") && !ehlo.contains("AUTH"), "{ehlo}");
        assert!(client.say("DATA\r\n").await.starts_with("503"));
        assert!(client.say("RCPT TO:<early@example.com>\r\n").await.starts_with("503"));
        assert!(client.say("VRFY ann\r\n").await.starts_with("502"));
        assert!(client.say("MAIL FROM:<cova@cova.test> BODY=8BITMIME\r\n").await.starts_with("250"));
        assert!(client.say("RCPT TO:<Ann@Example.com>\r\n").await.starts_with("250"));
        // A bare LF ends a line too.
        assert!(client.say("RCPT TO:<bob@example.com>\n").await.starts_with("250"));
        assert!(client.say("NOOP\r\n").await.starts_with("250"));
        assert!(client.say("DATA\r\n").await.starts_with("354"));
        // `..x` and `...` are stuffed lines; only the lone `.` ends the message.
        let message = "Subject: =?utf-8?q?Hallo?=\r\n\r\n..leading dot\r\n...\r\nlast\n.\r\n";
        assert!(client.say(message).await.starts_with("250"));
        assert!(client.say("RSET\r\n").await.starts_with("250"));
        assert!(client.say("QUIT\r\n").await.starts_with("221"));
        let mut rest = Vec::new();
        assert_eq!(client.read.read_to_end(&mut rest).await.expect("eof"), 0, "closed after QUIT");

        let stored = mails.lock().expect("lock").to_vec();
        assert_eq!(stored.len(), 1);
        let m = &stored[0];
        assert_eq!(m.from, "cova@cova.test");
        assert_eq!(m.to, ["Ann@Example.com", "bob@example.com"]);
        assert_eq!(m.data, "Subject: =?utf-8?q?Hallo?=\r\n\r\n.leading dot\r\n..\r\nlast\r\n");
        assert_eq!(m.subject(), "Hallo");
        assert_eq!(m.body_text(), ".leading dot\r\n..\r\nlast\r\n");
        server.abort();
    }

    #[tokio::test]
    async fn refuses_a_message_over_the_cap() {
        let mut input: &[u8] = b"x\r\n.\r\n";
        assert!(matches!(read_data(&mut input).await.expect("read"), Data::Message(m) if m == b"x\r\n"));
        let big = format!("{}\r\n.\r\n", "a".repeat(MAX_MESSAGE + 1));
        let mut input = big.as_bytes();
        assert!(matches!(read_data(&mut input).await.expect("read"), Data::TooBig));
        let mut input: &[u8] = b"unterminated\r\n";
        assert!(matches!(read_data(&mut input).await.expect("read"), Data::Closed));
        assert_eq!(declared_size("BODY=8BITMIME SIZE=20000000"), Some(20_000_000));
    }
}
