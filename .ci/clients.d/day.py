#!/usr/bin/env python3
"""An integrator's day, through the Python client generated from docs/openapi.json.

Run by .ci/clients against a live `cova serve` pointed at cova-sim. Every call goes through the
`sync_detailed` function of a generated `api` module; every 2xx answer must come back parsed as
the generated model the document promises (not None, not the `Error` model), downloads as
bytes or `File`. Webhooks are received over HTTPS by a receiver started here and verified with
the Standard Webhooks library (`standardwebhooks`), each body read with its generated model.

Environment (set by .ci/clients):
  CLIENTS_BASE_URL    cova's base URL
  CLIENTS_TOKEN       a token with every scope, of an account with a pack
  CLIENTS_SIM_URL     cova-sim's base URL (to publish a creator's post)
  CLIENTS_HOOK_HOST   the webhook's host name (cova's notifier.hosts sends it to 127.0.0.1)
  CLIENTS_HOOK_CERT   PEM certificate for that name, signed by an authority cova trusts
  CLIENTS_HOOK_KEY    its private key
  CLIENTS_PACKAGE     the generated package (cova_http_api_client)

Prints one line per step and last `clients: python day: N steps passed, M failed`; exits 1 when
a step failed.
"""

import base64
import hashlib
import hmac
import importlib
import io
import json
import os
import ssl
import sys
import threading
import time
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

PKG = os.environ.get("CLIENTS_PACKAGE", "cova_http_api_client")
BASE = os.environ["CLIENTS_BASE_URL"]
TOKEN = os.environ["CLIENTS_TOKEN"]
SIM = os.environ["CLIENTS_SIM_URL"]
HOOK_HOST = os.environ["CLIENTS_HOOK_HOST"]

client_pkg = importlib.import_module(PKG)
models = importlib.import_module(f"{PKG}.models")
types = importlib.import_module(f"{PKG}.types")
CLIENT = client_pkg.AuthenticatedClient(
    base_url=BASE, token=TOKEN, timeout=60.0, raise_on_unexpected_status=False
)


# Simulator posts (crates/cova-sim/README.md, "Post ids"): 7000000000000000000 + N is a normal
# TikTok post with N comments, 30 % of them replies.
def tiktok_url(comments: int, handle: str = "someone") -> str:
    return f"https://www.tiktok.com/@{handle}/video/{7000000000000000000 + comments}"


def tiktok_ref(comments: int) -> str:
    return f"tiktok:{7000000000000000000 + comments}"


META_POST = 12
DAY_POST = 60  # the post analysed, exported, kept in the library and given to the AI
BATCH_POSTS = [31, 32]
CANCELLED_POSTS = [41, 42, 43, 44]
CREATOR_ID, CREATOR_HANDLE, CREATOR_POST = "6800000000000000001", "brand", 14
KEYWORDS = ["price", "Preis", "🔥"]
WEBHOOK_TYPES = ["test", "job.complete", "keyword.alert", "batch.complete", "creator.post_found"]
# The generated model each webhook body must read as.
WEBHOOK_MODELS = {
    "test": "TestWebhook",
    "job.complete": "JobWebhook",
    "job.failed": "JobWebhook",
    "keyword.alert": "KeywordAlertWebhook",
    "batch.complete": "BatchWebhook",
    "creator.post_found": "CreatorWebhook",
}


class Failure(Exception):
    pass


def ended(body: dict) -> bool:
    return body["status"] in ("complete", "failed")


# ---- the generated client ----------------------------------------------------------------------


def op(tag: str, name: str):
    """The generated `sync_detailed` of `api/<tag>/<name>.py`."""
    try:
        module = importlib.import_module(f"{PKG}.api.{tag}.{name}")
    except ImportError as e:
        raise Failure(f"the generated client has no operation module api.{tag}.{name}: {e}") from e
    return module.sync_detailed


def model(name: str):
    cls = getattr(models, name, None)
    if cls is None:
        raise Failure(f"the generated client has no model {name}")
    return cls


def call(fn, *args, **kwargs):
    """One call; a 429 (rate or concurrency limit) is retried after its Retry-After, as the
    documentation asks of integrators."""
    response = None
    for _ in range(60):
        response = fn(*args, client=CLIENT, **kwargs)
        if int(response.status_code) != 429:
            return response
        time.sleep(min(float(response.headers.get("retry-after") or 1), 5.0))
    return response


def snippet(response) -> str:
    return response.content[:300].decode("utf-8", "replace")


def expect(response, name: str, statuses=(200,)):
    """The parsed answer, which must be an instance of the generated model `name`."""
    cls = model(name)
    code = int(response.status_code)
    if code not in statuses:
        raise Failure(f"HTTP {code}, expected {'/'.join(map(str, statuses))}: {snippet(response)}")
    parsed = response.parsed
    if parsed is None:
        raise Failure(
            f"HTTP {code}, but response.parsed is None: the generated client has no type for this answer"
        )
    if isinstance(parsed, models.Error):
        raise Failure(f"HTTP {code} parsed as the Error model: {parsed}")
    if not isinstance(parsed, cls):
        raise Failure(f"HTTP {code} parsed as {type(parsed).__name__}, not {name}")
    return parsed


def raw(response) -> dict:
    return json.loads(response.content)


def poll(what: str, read, path: str, done, name: str, timeout: float = 180.0):
    """Polls with the generated `read` until `done(json)`; every answer must parse as the model
    `name`. Returns the last answer, parsed. The state is read from the raw body, so that a
    client that cannot parse the answers still learns when the work is over and says why."""
    problem = None
    deadline = time.monotonic() + timeout
    while True:
        response = None
        try:
            response = read()
            if int(response.status_code) != 200:
                raise Failure(f"{what}: HTTP {int(response.status_code)}: {snippet(response)}")
            body = raw(response)
            expect(response, name)
        except Failure as e:
            if response is None or int(response.status_code) != 200:
                raise
            problem = problem or str(e)
        except Exception as e:  # the generated client could not read the answer
            problem = problem or f"the generated client could not read the answer: {type(e).__name__}: {e}"
            body = CLIENT.get_httpx_client().get(path).json()
        if done(body):
            if problem:
                raise Failure(problem)
            return response.parsed
        if time.monotonic() > deadline:
            raise Failure(f"{what} did not end within {timeout:.0f}s (last: {json.dumps(body)[:300]})")
        time.sleep(1.0)


# ---- webhooks ------------------------------------------------------------------------------------


class Receiver:
    """HTTPS on 127.0.0.1 with a certificate for HOOK_HOST. Each request is verified when it
    arrives (Standard Webhooks refuses timestamps more than 5 minutes old) and answered 204,
    so that cova records it as delivered whatever the verdict."""

    def __init__(self, cert: str, key: str):
        self.lock = threading.Lock()
        self.secret = None
        self.received = []  # dicts: type, event_id, verified, problem, payload
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                self.send_response(204)
                self.end_headers()
                receiver.record(self.path, headers, body)

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://{HOOK_HOST}:{self.server.server_address[1]}/cova"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def record(self, path: str, headers: dict, body: bytes):
        with self.lock:
            secret = self.secret
        entry = {
            "type": None,
            "event_id": headers.get("x-event-id"),
            "verified": False,
            "problem": None,
            "payload": None,
        }
        try:
            entry["type"] = json.loads(body).get("type")
        except ValueError:
            entry["problem"] = f"the body is not JSON: {body[:100]!r}"
        if path != "/cova":
            entry["problem"] = f"sent to {path}, not /cova"
        elif secret is None:
            entry["problem"] = "arrived before the webhook's secret was known"
        elif entry["problem"] is None:
            entry["verified"], entry["problem"], entry["payload"] = verify(secret, headers, body)
        with self.lock:
            self.received.append(entry)

    def by_type(self, kind: str) -> list:
        with self.lock:
            return [e for e in self.received if e["type"] == kind]

    def stop(self):
        self.server.shutdown()


def verify(secret: str, headers: dict, body: bytes):
    """(verified, problem, payload): the Standard Webhooks verdict with the account's secret,
    which another secret must not pass; the legacy X-Signature is checked too, to say which
    signature is missing when one is."""
    legacy = legacy_signature_ok(secret, headers.get("x-signature", ""), headers.get("x-event-id", ""), body)
    try:
        payload = Webhook(secret).verify(body, headers)
    except WebhookVerificationError as e:
        return (
            False,
            f"standardwebhooks refused it: {e} (X-Signature {'valid' if legacy else 'invalid'})",
            None,
        )
    other = "whsec_" + base64.b64encode(hashlib.sha256(secret.encode()).digest()).decode()
    try:
        Webhook(other).verify(body, headers)
        return False, "standardwebhooks accepted it with another secret too", None
    except WebhookVerificationError:
        pass
    if headers.get("webhook-id") != headers.get("x-event-id"):
        return (
            False,
            f"webhook-id {headers.get('webhook-id')!r} is not X-Event-Id {headers.get('x-event-id')!r}",
            None,
        )
    return True, None, payload


def legacy_signature_ok(secret: str, header: str, event_id: str, body: bytes) -> bool:
    """X-Signature as API.md's receiver checks it: v1 over the body, v2 over the event id too."""
    parts = dict(p.strip().partition("=")[::2] for p in header.split(",") if "=" in p)
    t, v1, v2 = parts.get("t", ""), parts.get("v1", ""), parts.get("v2", "")
    key = secret.encode()
    expected_v1 = hmac.new(key, t.encode() + b"." + body, hashlib.sha256).hexdigest()
    expected_v2 = hmac.new(key, t.encode() + b"." + event_id.encode() + b"." + body, hashlib.sha256).hexdigest()
    return bool(t) and hmac.compare_digest(expected_v1, v1) and hmac.compare_digest(expected_v2, v2)


# ---- the day -------------------------------------------------------------------------------------


class Day:
    def __init__(self):
        self.passed = 0
        self.failed = []

    def step(self, name: str, fn, *args):
        try:
            detail = fn(*args)
        except Failure as e:
            self.fail(name, str(e))
            return None
        except Exception as e:  # the generated client raising is a finding, not a crash
            self.fail(name, f"{type(e).__name__}: {e}")
            return None
        self.passed += 1
        print(f"day: ok   {name}{': ' + detail if detail else ''}", flush=True)
        return True

    def fail(self, name: str, why: str):
        self.failed.append(name)
        print(f"day: FAIL {name}: {why}", flush=True)


def check_export(response, fmt: str, at_least: int) -> str:
    code = int(response.status_code)
    if code != 200:
        raise Failure(f"HTTP {code}: {snippet(response)}")
    content = response.content
    kind = response.headers.get("content-type", "")
    parsed = response.parsed
    if isinstance(parsed, types.File):
        data = parsed.payload.read()
    elif isinstance(parsed, (bytes, bytearray)):
        data = bytes(parsed)
    elif isinstance(parsed, str) and fmt != "xlsx":
        data = parsed.encode("utf-8")
    else:
        raise Failure(
            f"response.parsed is {type(parsed).__name__}, not bytes or File"
            + (": the generated client decodes the workbook as text" if isinstance(parsed, str) else "")
        )
    if fmt == "xlsx":
        if not kind.startswith("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"):
            raise Failure(f"Content-Type {kind!r}")
        if data != content:
            raise Failure("the parsed bytes differ from the answer's bytes")
        with zipfile.ZipFile(io.BytesIO(data)) as book:
            if "xl/workbook.xml" not in book.namelist():
                raise Failure(f"not a workbook: {book.namelist()[:5]}")
        return f"{type(parsed).__name__}, {len(data)} bytes, a workbook"
    text = data.decode("utf-8").lstrip("\ufeff")
    lines = [line for line in text.splitlines() if line]
    if fmt == "csv":
        if not kind.startswith("text/csv"):
            raise Failure(f"Content-Type {kind!r}")
        if not lines or not lines[0].startswith("post_url,"):
            raise Failure(f"no CSV header row: {text[:100]!r}")
        rows = len(lines) - 1  # a text with a line break inside a cell makes this an upper bound
    else:
        if not kind.startswith("application/x-ndjson"):
            raise Failure(f"Content-Type {kind!r}")
        for line in lines:
            json.loads(line)
        rows = len(lines)
    if rows < at_least:
        raise Failure(f"{rows} rows, expected at least {at_least}")
    return f"{type(parsed).__name__}, {rows} rows"


def main() -> int:
    day = Day()
    hooks = Receiver(os.environ["CLIENTS_HOOK_CERT"], os.environ["CLIENTS_HOOK_KEY"])
    s = {}  # what the steps learn: ids, counts

    def usage():
        u = expect(call(op("usage", "get_usage")), "Usage")
        return f"Usage, {u.comments.to_dict()}"

    def set_webhook():
        body = model("NotificationChannelsBody")(
            webhook=model("WebhookChannelBody")(url=hooks.url, enabled=True, job_events=True)
        )
        saved = expect(
            call(op("notifications", "put_notification_channels"), body=body), "NotificationChannelsSaved"
        )
        secret = getattr(saved.webhook, "secret", None)
        if not isinstance(secret, str) or not secret.startswith("whsec_"):
            raise Failure(f"no whsec_ secret in the answer that created the webhook: {saved.to_dict()}")
        with hooks.lock:
            hooks.secret = secret
        return f"NotificationChannelsSaved, webhook {saved.webhook.url}"

    def get_channels():
        shown = expect(call(op("notifications", "get_notification_channels")), "NotificationChannels")
        if shown.webhook is None or not shown.webhook.enabled or not shown.webhook.job_events:
            raise Failure(f"the webhook is not on with job_events: {shown.to_dict()}")
        if "secret" in shown.webhook.to_dict():
            raise Failure("GET shows the secret")
        return "NotificationChannels, webhook on with job_events"

    def test_channels():
        result = expect(call(op("notifications", "test_notification_channels")), "ChannelTest")
        if result.webhook is None or not result.webhook.ok:
            raise Failure(f"the receiver did not accept the test: {result.to_dict()}")
        return f"ChannelTest, the receiver answered {result.webhook.status}"

    def put_keywords():
        kw = expect(
            call(op("notifications", "put_keywords"), body=model("KeywordsBody")(keywords=KEYWORDS)),
            "Keywords",
        )
        got = expect(call(op("notifications", "get_keywords")), "Keywords")
        if got.keywords != kw.keywords or len(kw.keywords) != len(KEYWORDS):
            raise Failure(f"PUT stored {kw.keywords}, GET answers {got.keywords}")
        return f"Keywords {got.keywords}"

    def metadata():
        meta = expect(
            call(op("metadata", "post_metadata"), body=model("UrlBody")(url=tiktok_url(META_POST))),
            "Metadata",
        )
        if meta.ref != tiktok_ref(META_POST):
            raise Failure(f"ref {meta.ref}")
        return f"Metadata of {meta.ref}"

    def analyze():
        body = model("AnalyzeBody")(url=tiktok_url(DAY_POST))
        job = expect(call(op("analyze", "post_analyze"), body=body), "Job", statuses=(200, 202))
        s["job_id"], s["ref"] = job.job_id, job.ref
        return f"Job {job.job_id} {job.status}"

    def poll_job():
        if "job_id" not in s:
            raise Failure("no job was started")
        job_id = s["job_id"]
        read = lambda: call(op("analyze", "get_analyze_job"), job_id)  # noqa: E731
        job = poll(f"job {job_id}", read, f"/api/v1/analyze/{job_id}", ended, "JobWithResult")
        if job.status.value != "complete":
            raise Failure(f"the job ended {job.status}: {job.to_dict().get('error')}")
        result = job.result
        if not isinstance(result, model("AnalysisResult")):
            raise Failure(f"result is {type(result).__name__}, not AnalysisResult")
        replies = sum(len(c.replies) for c in result.comments)
        if not result.comments or not replies:
            raise Failure(f"{len(result.comments)} comments, {replies} replies")
        for c in result.comments:
            for r in c.replies:
                if not isinstance(r, model("Reply")) or r.parent_id != c.id:
                    raise Failure(f"reply {getattr(r, 'id', r)} is not a Reply of {c.id}")
        s["comments"] = len(result.comments) + replies
        return f"JobWithResult complete: {len(result.comments)} comments with {replies} replies"

    def job_export(fmt: str):
        if "job_id" not in s:
            raise Failure("no job was started")
        fmt_enum = getattr(model("ExportJobFormat"), fmt.upper())
        return check_export(call(op("analyze", "export_job"), s["job_id"], format_=fmt_enum), fmt, 1)

    def library_list():
        lst = expect(call(op("library", "list_analyses")), "AnalysisList")
        refs = [e.ref for e in lst.items]
        if tiktok_ref(DAY_POST) not in refs:
            raise Failure(f"{tiktok_ref(DAY_POST)} not among {refs}")
        return f"AnalysisList of {len(refs)}"

    def library_open():
        b = expect(call(op("library", "get_analysis"), tiktok_ref(DAY_POST)), "AnalysisBreakdown")
        return f"AnalysisBreakdown of {b.ref}"

    def library_save():
        e = expect(call(op("library", "save_analysis"), tiktok_ref(DAY_POST)), "AnalysisEntry")
        return f"AnalysisEntry {e.ref} {e.status}"

    def library_watch():
        body = model("WatchBody")(enabled=True, interval_min=360)
        w = expect(call(op("library", "put_analysis_watch"), tiktok_ref(DAY_POST), body=body), "Watch")
        if not w.enabled:
            raise Failure(f"the watch is off: {w.to_dict()}")
        return f"Watch on, every {w.interval_min} min"

    def library_refresh():
        job = expect(
            call(op("library", "refresh_analysis"), tiktok_ref(DAY_POST)), "Job", statuses=(200, 202)
        )
        read = lambda: call(op("analyze", "get_analyze_job"), job.job_id, limit=1)  # noqa: E731
        done = poll(
            f"refresh {job.job_id}", read, f"/api/v1/analyze/{job.job_id}?limit=1", ended, "JobWithResult"
        )
        if done.status.value != "complete":
            raise Failure(f"the refresh ended {done.status.value}: {done.to_dict().get('error')}")
        return f"Job {job.job_id}, then JobWithResult complete"

    def library_export(fmt: str):
        fmt_enum = getattr(model("ExportAnalysisFormat"), fmt.upper())
        at_least = s.get("comments", 1)
        return check_export(
            call(op("library", "export_analysis"), tiktok_ref(DAY_POST), format_=fmt_enum), fmt, at_least
        )

    def search():
        # The words of the keywords, found in the post kept in the library, with their post.
        page = expect(
            call(op("library", "search_comments"), q="price", ref=[tiktok_ref(DAY_POST)], limit=100),
            "CommentSearchPage",
        )
        if not page.items:
            raise Failure("no comment of the day's post says `price`")
        for hit in page.items:
            if hit.post.ref != tiktok_ref(DAY_POST) or "price" not in hit.matches:
                raise Failure(f"hit {hit.comment.id}: post {hit.post.ref}, matches {hit.matches}")
        s["priced"] = len(page.items)
        return f"CommentSearchPage of {len(page.items)} hits"

    def search_export(fmt: str):
        fmt_enum = getattr(model("ExportCommentSearchFormat"), fmt.upper())
        at_least = s.get("priced", 1)
        return check_export(
            call(op("library", "export_comment_search"), q="price", ref=[tiktok_ref(DAY_POST)], format_=fmt_enum),
            fmt,
            at_least,
        )

    def batch_preview():
        body = model("BatchBody")(urls=[tiktok_url(n) for n in BATCH_POSTS])
        p = expect(call(op("analyze", "preview_batch"), body=body), "BatchPreview")
        return f"BatchPreview: {p.posts} posts, at most {p.charge_at_most} comments"

    def batch_run():
        body = model("BatchBody")(urls=[tiktok_url(n) for n in BATCH_POSTS])
        b = expect(call(op("analyze", "post_batch"), body=body), "Batch", statuses=(200, 202))
        s["batch_id"] = b.batch_id
        read = lambda: call(op("analyze", "get_batch"), b.batch_id)  # noqa: E731
        over = lambda x: x["status"] != "running" and x["finished_at"] is not None  # noqa: E731
        done = poll(f"batch {b.batch_id}", read, f"/api/v1/analyze/batch/{b.batch_id}", over, "Batch")
        s["batch_jobs"] = [i.job.job_id for i in done.items if i.job is not None]
        return f"Batch {done.batch_id} {done.status.value}: {done.counts.to_dict()}"

    def batch_cancel():
        body = model("BatchBody")(urls=[tiktok_url(n) for n in CANCELLED_POSTS])
        b = expect(call(op("analyze", "post_batch"), body=body), "Batch", statuses=(200, 202))
        c = expect(call(op("analyze", "cancel_batch"), b.batch_id), "Batch")
        if c.status.value != "cancelled":
            raise Failure(f"status {c.status.value} after cancel")
        return f"Batch {c.batch_id} cancelled: {c.counts.to_dict()}"

    def history():
        seen, pages, cursor = [], 0, None
        while True:
            kwargs = {"limit": 2} if cursor is None else {"limit": 2, "cursor": cursor}
            page = expect(call(op("analyze", "list_analyze_jobs"), **kwargs), "JobHistory")
            pages += 1
            seen += [i.job_id for i in page.items]
            cursor = page.next_cursor
            if not cursor or pages > 100:
                break
        wanted = [s.get("job_id")] + s.get("batch_jobs", [])
        missing = [j for j in wanted if j and j not in seen]
        if missing or len(seen) != len(set(seen)) or pages < 2:
            raise Failure(f"{pages} pages, {len(seen)} jobs ({len(set(seen))} distinct), missing {missing}")
        return f"JobHistory: {len(seen)} jobs over {pages} pages of 2"

    def creator_follow():
        # The simulator's creator publishes a post a few seconds after it is followed: posts
        # published before `added_at` are not taken (backfill_days 0).
        s["published_ms"] = int(time.time() * 1000) + 4000
        creator = {
            "platform": "tiktok",
            "id": CREATOR_ID,
            "handle": CREATOR_HANDLE,
            "name": "Brand",
            "private": False,
            "shorts_playlist": True,
            "posts": [
                {
                    "id": str(7000000000000000000 + CREATOR_POST),
                    "published_at_ms": s["published_ms"],
                    "pinned": False,
                }
            ],
        }
        request = urllib.request.Request(
            f"{SIM}/__sim/creators",
            data=json.dumps(creator).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).read()
        body = model("CreatorAddBody")(url=f"https://www.tiktok.com/@{CREATOR_HANDLE}")
        c = expect(call(op("library", "add_creator"), body=body), "Creator", statuses=(200, 201))
        s["creator_ref"] = c.ref
        return f"Creator {c.ref} @{c.handle}"

    def creator_list():
        lst = expect(call(op("library", "list_creators")), "CreatorList")
        if s.get("creator_ref") not in [c.ref for c in lst.items]:
            raise Failure(f"{s.get('creator_ref')} is not listed")
        return f"CreatorList of {len(lst.items)}"

    def creator_refresh():
        ref = s.get("creator_ref")
        if not ref:
            raise Failure("no creator was added")
        time.sleep(max(0.0, (s["published_ms"] + 1500) / 1000 - time.time()))
        run = expect(call(op("library", "refresh_creator"), ref), "CreatorRun")
        if tiktok_ref(CREATOR_POST) not in run.found:
            raise Failure(f"found {run.found}, not {tiktok_ref(CREATOR_POST)}")
        detail = expect(call(op("library", "get_creator"), ref), "CreatorDetail")
        if tiktok_ref(CREATOR_POST) not in [p.ref for p in detail.found.items]:
            raise Failure(f"the creator's found posts are {[p.ref for p in detail.found.items]}")
        return f"CreatorRun found {run.found}, batch {run.batch_id}; CreatorDetail lists it"

    def creator_watch():
        ref = s.get("creator_ref")
        if not ref:
            raise Failure("no creator was added")
        w = expect(
            call(op("library", "put_creator_watch"), ref, body=model("CreatorWatchBody")(enabled=True)),
            "CreatorWatch",
        )
        if not w.enabled:
            raise Failure(f"not followed: {w.to_dict()}")
        return f"CreatorWatch on, every {w.interval_min} min"

    def ai():
        quote = expect(
            call(op("ai", "post_ai_quote"), body=model("AiQuoteBody")(ref=tiktok_ref(DAY_POST))), "AiQuote"
        )
        job = expect(
            call(op("ai", "post_ai_run"), body=model("AiRunBody")(quote_id=quote.quote_id)),
            "AiJob",
            statuses=(200, 202),
        )
        read = lambda: call(op("ai", "get_ai_job"), job.id)  # noqa: E731
        done = poll(f"AI job {job.id}", read, f"/api/v1/ai/jobs/{job.id}", ended, "AiJob")
        if done.status.value != "complete" or not isinstance(done.result, model("AiResult")):
            raise Failure(f"the AI job ended {done.status.value}: {done.to_dict().get('error')}")
        return f"AiQuote charge {quote.charge}, AiJob complete: {done.result.summary[:60]!r}"

    def alerts():
        deadline = time.monotonic() + 60
        while True:
            items, since = [], None
            while True:
                kwargs = {"limit": 100} if since is None else {"limit": 100, "since": since}
                page = expect(call(op("notifications", "list_keyword_alerts"), **kwargs), "KeywordAlertList")
                items += page.items
                if len(page.items) < 100 or page.next_since == since:
                    break
                since = page.next_since
            ours = [a for a in items if a.ref == tiktok_ref(DAY_POST)]
            if ours:
                return f"KeywordAlertList: {len(items)} alerts, {len(ours)} on {tiktok_ref(DAY_POST)}"
            if time.monotonic() > deadline:
                raise Failure(f"no alert on {tiktok_ref(DAY_POST)} within 60s ({len(items)} alerts in all)")
            time.sleep(1)

    def spike_settings():
        changed = expect(
            call(
                op("notifications", "put_spike_settings"),
                body=model("SpikeSettingsBody").from_dict({"sensitivity": "strict", "cooldown_min": 120}),
            ),
            "SpikeSettings",
        )
        got = expect(call(op("notifications", "get_spike_settings")), "SpikeSettings")
        if (got.sensitivity.value, got.cooldown_min, got.judged.min_comments) != ("strict", 120, 50):
            raise Failure(f"PUT answered {changed.to_dict()}, GET answers {got.to_dict()}")
        back = call(
            op("notifications", "put_spike_settings"),
            body=model("SpikeSettingsBody").from_dict({"sensitivity": "balanced", "cooldown_min": 360}),
        )
        expect(back, "SpikeSettings")
        return f"SpikeSettings {got.sensitivity.value}: an alert needs {got.judged.min_comments} comments in the hour"

    def spike_post():
        ref = tiktok_ref(DAY_POST)
        applies = expect(call(op("notifications", "get_spike_subject_settings"), ref), "SpikeSettings")
        if applies.own or not applies.judging:
            raise Failure(f"a library post follows the account's settings and says what it judges: {applies.to_dict()}")
        own = expect(
            call(
                op("notifications", "put_spike_subject_settings"),
                ref,
                body=model("SpikeSettingsBody").from_dict({"min_comments": 10}),
            ),
            "SpikeSettings",
        )
        if not own.own or own.min_comments != 10:
            raise Failure(f"the post's own settings were not kept: {own.to_dict()}")
        back = expect(call(op("notifications", "delete_spike_subject_settings"), ref), "SpikeSettings")
        if back.own:
            raise Failure(f"the post still has settings of its own: {back.to_dict()}")
        return f"SpikeSettings of {ref}: own, then the account's; volume {applies.judging.volume.value}"

    def spike_alerts():
        page = expect(call(op("notifications", "list_spike_alerts"), limit=100), "SpikeAlertList")
        for a in page.items:
            if a.kind.value not in ("volume", "sentiment", "takeoff"):
                raise Failure(f"an alert of an unknown kind: {a.to_dict()}")
        again = expect(call(op("notifications", "list_spike_alerts"), since=page.next_since), "SpikeAlertList")
        if again.items:
            raise Failure(f"polling after next_since returned {len(again.items)} alerts again")
        return f"SpikeAlertList: {len(page.items)} alerts, next_since {page.next_since}"

    def webhook(kind: str):
        deadline = time.monotonic() + 90
        while not hooks.by_type(kind) and time.monotonic() < deadline:
            time.sleep(0.5)
        got = hooks.by_type(kind)
        if not got:
            raise Failure(f"no {kind} webhook arrived within 90s")
        bad = [e for e in got if not e["verified"]]
        if bad:
            raise Failure(f"{len(bad)} of {len(got)} {kind} webhooks not verified: {bad[0]['problem']}")
        for e in got:
            model(WEBHOOK_MODELS[kind]).from_dict(e["payload"])
        return f"{len(got)} verified with standardwebhooks, read as {WEBHOOK_MODELS[kind]}"

    def deliveries():
        wanted = {"job.complete", "keyword.alert", "batch.complete", "creator.post_found"}
        deadline = time.monotonic() + 60
        while True:
            items, cursor, pages = [], None, 0
            while True:
                kwargs = {"limit": 50} if cursor is None else {"limit": 50, "cursor": cursor}
                page = expect(call(op("notifications", "list_deliveries"), **kwargs), "DeliveryList")
                items += page.items
                pages += 1
                cursor = page.next_cursor
                if not cursor or pages > 100:
                    break
            delivered = {
                d.type_.value for d in items if d.channel.value == "webhook" and d.state.value == "delivered"
            }
            if wanted <= delivered:
                return f"DeliveryList: {len(items)} entries, delivered to the webhook: {sorted(delivered)}"
            if time.monotonic() > deadline:
                states = sorted({(d.type_.value, d.state.value) for d in items})
                raise Failure(f"not delivered to the webhook: {sorted(wanted - delivered)} (log: {states})")
            time.sleep(1)

    day.step("usage", usage)
    day.step("notification channels: set the webhook", set_webhook)
    day.step("notification channels: read", get_channels)
    day.step("notification channels: test", test_channels)
    day.step("keywords: set and read", put_keywords)
    day.step("metadata of a post", metadata)
    day.step("analyze a post", analyze)
    day.step("poll the job until complete, read its result", poll_job)
    for fmt in ("csv", "jsonl", "xlsx"):
        day.step(f"export the job as {fmt}", job_export, fmt)
    day.step("library: list", library_list)
    day.step("library: open the breakdown", library_open)
    day.step("library: save", library_save)
    day.step("library: watch", library_watch)
    day.step("library: refresh", library_refresh)
    for fmt in ("csv", "jsonl", "xlsx"):
        day.step(f"library: export as {fmt}", library_export, fmt)
    day.step("search: every kept comment", search)
    for fmt in ("csv", "jsonl", "xlsx"):
        day.step(f"search: export as {fmt}", search_export, fmt)
    day.step("batch: preview", batch_preview)
    day.step("batch: run to the end", batch_run)
    day.step("batch: cancel", batch_cancel)
    day.step("history: page through every job", history)
    day.step("creators: follow", creator_follow)
    day.step("creators: list", creator_list)
    day.step("creators: refresh finds the new post", creator_refresh)
    day.step("creators: watch", creator_watch)
    day.step("AI: quote, run, poll", ai)
    day.step("keyword alerts: list", alerts)
    day.step("spike alerts: the account's settings", spike_settings)
    day.step("spike alerts: a post's settings and what it can judge", spike_post)
    day.step("spike alerts: list and poll", spike_alerts)
    for kind in WEBHOOK_TYPES:
        day.step(f"webhook {kind}", webhook, kind)
    day.step("delivery log", deliveries)

    with hooks.lock:
        counts = {}
        for e in hooks.received:
            key = (e["type"], e["verified"])
            counts[key] = counts.get(key, 0) + 1
    verified = sorted({t for (t, ok) in counts if ok and t})
    print(f"day: webhooks received: {len(hooks.received)}; verified types: {', '.join(verified) or 'none'}")
    hooks.stop()
    print(f"clients: python day: {day.passed} steps passed, {len(day.failed)} failed", flush=True)
    return 1 if day.failed else 0


if __name__ == "__main__":
    sys.exit(main())
