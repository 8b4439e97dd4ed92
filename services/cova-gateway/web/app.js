"use strict";
// The cova workspace: one page with hash routes. Every call goes to the same /api/v1 endpoints
// an integrator uses, authenticated by the session cookie (plus X-CSRF-Token on unsafe methods).
// Untrusted text (comments, titles, details) only ever reaches the page through textContent.

const API = "/api/v1";
const POLL_MS = 1500; // the API asks for one poll every 1 to 2 seconds
const CHECKOUT_POLL_MS = 1000;
const CHECKOUT_WAIT_MS = 30000;
const COMMENTS_PAGE = 300; // comments drawn at once; long posts stay fast, more on demand
const NEXT_KEY = "cova.next";
// RULES (scopes, limits, error codes) is declared by the server above this script, from the
// same constants that enforce them.
const SCOPES = RULES.scopes;
const LIMITS = RULES.limits;

/// An error code of the API's catalogue, by name (a name it does not have is a bug).
function code(name) {
  if (!RULES.codes.includes(name)) throw new Error(`unknown error code ${name}`);
  return name;
}
const PRIVATE = new Set(["dashboard", "analyze", "jobs", "library", "search", "creators", "ai", "alerts", "tokens", "billing"]);

let session = null; // the /auth/session body, or null while signed out
let csrfToken = "";
let viewCtl = new AbortController(); // aborted on every navigation: stops the old view's polls

// ---------------------------------------------------------------- DOM helpers

function h(tag, props = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [key, val] of Object.entries(props)) {
    if (val == null || val === false) continue;
    if (key === "text") el.textContent = String(val);
    else if (key.startsWith("on") && typeof val === "function") el.addEventListener(key.slice(2), val);
    else if (key === "value" || key === "checked") el[key] = val;
    else el.setAttribute(key, val === true ? "" : String(val));
  }
  appendKids(el, kids);
  return el;
}

function appendKids(el, kids) {
  for (const kid of kids.flat(Infinity)) {
    if (kid == null || kid === false || kid === "") continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
}

function fieldRow(labelText, control, hint) {
  const row = h("div", { class: "field" }, h("label", { for: control.id, text: labelText }), control);
  if (hint) {
    const id = `${control.id}-hint`;
    row.append(h("small", { id, class: "hint", text: hint }));
    control.setAttribute("aria-describedby", id);
  }
  return row;
}

function checkRow(labelText, control) {
  return h("div", { class: "check" }, control, h("label", { for: control.id, text: labelText }));
}

function statusEl(id, tag = "p") {
  return h(tag, { id, class: "status", role: "status", "aria-live": "polite" });
}

function card(title, ...kids) {
  return h("section", { class: "card" }, title && h("h2", { text: title }), ...kids);
}

function form(id, kids, onSubmit) {
  const f = h("form", { id, class: "stack" }, ...kids);
  f.addEventListener("submit", (event) => {
    event.preventDefault();
    onSubmit(event.submitter ?? f.querySelector("[type=submit]"));
  });
  return f;
}

// Tables turn into stacked cards on phones; data-label names each cell there.
function table(id, headers, caption) {
  const tbody = h("tbody");
  const el = h("table", { id, class: "data" },
    caption && h("caption", { class: "visually-hidden", text: caption }),
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col", text: t })))),
    tbody);
  return { el, tbody, headers };
}

function row(headers, cells, props = {}) {
  return h("tr", props, cells.map((c, i) => h("td", { "data-label": headers[i] }, c)));
}

function emptyRow(headers, text) {
  return h("tr", { class: "empty" }, h("td", { colspan: headers.length, text }));
}

// ---------------------------------------------------------------- formatting

const fmtNum = (n) => (n == null ? "—" : Number(n).toLocaleString());
// One formatter for every date: building one per call is the slow part of toLocaleString.
const DATE_FORMAT = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "2-digit", second: "2-digit" });
const fmtDate = (iso) => (iso ? DATE_FORMAT.format(new Date(iso)) : "—");
const fmtPct = (x) => Number(x ?? 0).toLocaleString(undefined, { style: "percent", maximumFractionDigits: 1 });
const plural = (n, one, many = `${one}s`) => `${fmtNum(n)} ${n === 1 ? one : many}`;

function timeEl(iso) {
  return iso ? h("time", { datetime: iso, text: fmtDate(iso) }) : h("span", { class: "muted", text: "—" });
}

// Prices come in the currency's minor unit (cents for usd).
function fmtMoney(price) {
  try {
    const f = new Intl.NumberFormat(undefined, { style: "currency", currency: String(price.currency).toUpperCase() });
    return f.format(price.amount / 10 ** f.resolvedOptions().maximumFractionDigits);
  } catch {
    return `${(price.amount / 100).toFixed(2)} ${String(price.currency).toUpperCase()}`;
  }
}

// Post URLs come from the platforms: only http(s) links are ever made clickable.
function safeHttpUrl(u) {
  try {
    const url = new URL(u);
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  } catch {
    return null;
  }
}

// The API's states, as a sentence says them.
const STATE_WORDS = {
  queued: "waiting to start", in_progress: "collecting", complete: "complete", failed: "failed",
  waiting: "waiting for a free slot", running: "collecting", refused: "not started", cancelled: "cancelled",
  ready: "ready", expired: "expired", metadata_only: "details only", pending: "pending", paid: "paid",
  review: "under review", delivered: "delivered", given_up: "given up", post_cap: "the 5,000-comment limit per post",
  balance: "your comment balance", max_comments: "your limit of comments per post",
  visitor_view: "what Instagram shows a visitor", platform_stopped: "where the platform stopped",
};

// What a post's author did, as the page says it.
const COMMENTS_OFF = "The post's author turned its comments off: there was nothing to collect, and nothing was charged.";
const inWords = (state) => STATE_WORDS[state] ?? String(state ?? "—").replaceAll("_", " ");
// An AI run analyses; it collects nothing.
const aiInWords = (state) => (state === "running" || state === "in_progress" ? "analysing" : inWords(state));

// AI tasks and delivered events, as a list of them says them.
const PLATFORM_NAMES = { tiktok: "TikTok", youtube: "YouTube", instagram: "Instagram" };
const platformName = (p) => PLATFORM_NAMES[p] ?? String(p ?? "");
const TASK_WORDS = {
  sentiment: "sentiment", topics: "topics", questions: "questions", languages: "languages", spam: "spam",
  summary: "summary", phrase_matches: "watch phrases",
};
const tasksInWords = (tasks) => (tasks ?? []).map((t) => TASK_WORDS[t] ?? t.replaceAll("_", " ")).join(", ");
const EVENT_WORDS = {
  "keyword.alert": "keyword alert", "job.complete": "collection complete", "job.failed": "collection failed",
  "batch.complete": "list complete", "creator.post_found": "new post of a creator", test: "test",
};

// The API's details name fields the way a program does (`webhook.url`); the page says them.
const FIELD_WORDS = {
  "webhook.url": "the webhook URL", "telegram.chat_id": "the Telegram chat id", url: "the post URL",
  urls: "the list of post URLs", keywords: "the keywords", queries: "the watch phrases",
  interval_min: "the watch interval", enabled: "the on/off switch", name: "the name", scopes: "the scopes",
  email: "the e-mail address", password: "the password", pack: "the pack", ref: "the post",
  limit: "the page size", cursor: "the page", format: "the format", quote_id: "the quote", token: "the link",
  max_comments: "the limit of comments per post",
  follow_days: "the days each new post is followed", backfill_days: "the days of earlier posts to take",
};
function plainWords(detail) {
  // A quoted field name becomes words; anything else quoted (a host, a link, a handle, a
  // ref) stays exactly as it was typed, dots included.
  return String(detail).replace(/`([^`]+)`/g, (_, term) => FIELD_WORDS[term]
    ?? FIELD_WORDS[term.replace(/\[\d+\]$/, "")] ?? (/^[a-z]+(_[a-z]+)+$/.test(term) ? term.replaceAll("_", " ") : term));
}

// An avatar or a comment image: cova's own copy, or nothing (the platforms' links expire).
function thumb(m, alt, cls) {
  if (!m || !isOwnMedia(m.url)) return null;
  const img = h("img", { class: cls, src: m.url, alt, loading: "lazy", width: m.width, height: m.height });
  img.addEventListener("error", () => img.remove());
  return img;
}

const isOwnMedia = (u) => typeof u === "string" && u.startsWith("/api/v1/media/");
const refPath = (ref) => encodeURIComponent(ref).replace(/%3A/gi, ":");
const truncate = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

function hashFor(path, params = {}) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v != null && v !== "")).toString();
  return `#/${path}${q ? `?${q}` : ""}`;
}

function postTitle(md, fallback) {
  const text = md?.title || md?.description || "";
  return text ? truncate(text.replace(/\s+/g, " ").trim(), 90) : fallback;
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, code, detail, retryAfter = 0) {
    super(detail);
    Object.assign(this, { status, code, detail, retryAfter });
  }
}

const isAbort = (err) => err?.name === "AbortError";

function pageToken() {
  return document.querySelector('meta[name="cova-page-token"]')?.content ?? "";
}

// One helper for every call: JSON in and out, CSRF on unsafe methods, {detail, code} errors.
async function api(method, path, body, opts = {}) {
  const headers = { Accept: "application/json" };
  const init = {
    method,
    headers,
    credentials: opts.anonymous ? "omit" : "same-origin",
    signal: "signal" in opts ? opts.signal : viewCtl.signal,
  };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (opts.anonymous) headers["X-Cova-Page-Token"] = pageToken();
  else if (method !== "GET" && csrfToken) headers["X-CSRF-Token"] = csrfToken;

  let res;
  try {
    res = await fetch(API + path, init);
  } catch (err) {
    if (isAbort(err)) throw err;
    throw new ApiError(0, "network", "cova could not be reached. Check the connection and try again.");
  }
  const data = res.status === 204 ? null : await res.json().catch(() => null);
  if (res.ok) return data;

  const err = new ApiError(res.status, data?.code ?? `http_${res.status}`,
    data?.detail ?? `The request failed (HTTP ${res.status}).`, Number(res.headers.get("Retry-After")) || 0);
  if (err.code === code("csrf_failed") && !opts.retried && !opts.anonymous) {
    // The session rotated (e-mail confirmed, another tab logged in): take its new token, retry once.
    await loadSession().catch(() => {});
    if (session) return api(method, path, body, { ...opts, retried: true });
    toLogin();
  }
  if (res.status === 401 && !opts.anonymous && !path.startsWith("/auth/")) {
    setSession(null);
    toLogin();
  }
  throw err;
}

function toLogin() {
  // Keep a payment return so it is not lost behind the login form.
  if (/^#\/billing\?(.*&)?checkout=/.test(location.hash)) sessionStorage.setItem(NEXT_KEY, location.hash);
  go("#/login");
}

async function loadSession() {
  try {
    setSession(await api("GET", "/auth/session", undefined, { signal: null }));
  } catch (err) {
    if (err.status === 401) setSession(null);
    else throw err;
  }
}

function setSession(s) {
  session = s;
  csrfToken = s?.csrf_token ?? "";
  document.getElementById("nav").hidden = !s;
  document.getElementById("nav-anon").hidden = !!s;
  document.getElementById("nav-email").textContent = s?.account?.email ?? "";
}

function sleep(ms, signal = viewCtl.signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

// Polls path until done(answer); a busy or unreachable server is waited out rather than fatal.
async function poll(path, done, onEach) {
  for (;;) {
    let answer;
    try {
      answer = await api("GET", path);
    } catch (err) {
      if (isAbort(err) || ![0, 429, 503].includes(err.status)) throw err;
      await sleep(Math.max(err.retryAfter * 1000, POLL_MS));
      continue;
    }
    onEach(answer);
    if (done(answer)) return answer;
    await sleep(POLL_MS);
  }
}

// ---------------------------------------------------------------- views: frame and errors

function makeView(title) {
  const heading = h("h1", { tabindex: "-1", text: title });
  // Exactly one alert region per view, so every error lands in the same place.
  const alert = h("div", { class: "alert", role: "alert" });
  const root = h("div", { class: "view" }, heading, alert);
  return {
    root, heading, alert,
    add(...els) {
      appendKids(root, els);
      return els[0];
    },
  };
}

function showError(v, err) {
  if (isAbort(err)) return;
  const detail = plainWords(err?.detail ?? err?.message ?? String(err));
  v.alert.replaceChildren(h("span", { text: detail }));
  if (err?.code === code("quota_exceeded") || err?.code === code("payment_required")) {
    v.alert.append(" ", h("a", { href: "#/billing", text: "Buy a comment pack" }));
  }
  v.alert.scrollIntoView?.({ block: "nearest" });
}

const clearError = (v) => v.alert.replaceChildren();

// Runs fn with its button disabled and any error shown in the view.
async function busy(v, btn, fn) {
  clearError(v);
  if (btn) btn.disabled = true;
  try {
    return await fn();
  } catch (err) {
    showError(v, err);
    return undefined;
  } finally {
    if (btn) btn.disabled = false;
  }
}

async function copyText(text, statusNode) {
  try {
    await navigator.clipboard.writeText(text);
    statusNode.textContent = "Copied.";
  } catch {
    statusNode.textContent = "Copy failed: select the text and copy it by hand.";
  }
}

// ---------------------------------------------------------------- router

const ROUTES = {
  "": ["cova", viewHome],
  signup: ["Create your account", viewSignup],
  confirm: ["Confirm your e-mail", viewConfirm],
  login: ["Log in", viewLogin],
  reset: ["Reset your password", viewReset],
  dashboard: ["Dashboard", viewDashboard],
  analyze: ["Analyze posts", viewAnalyze],
  jobs: ["Jobs", viewJobs],
  library: ["Library", viewLibrary],
  search: ["Search comments", viewSearch],
  creators: ["Creators", viewCreators],
  ai: ["AI analysis", viewAi],
  alerts: ["Keywords and alerts", viewAlerts],
  tokens: ["API tokens", viewTokens],
  billing: ["Billing", viewBilling],
};

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs = ""] = raw.split("?");
  let parts;
  try {
    parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    parts = ["?"];
  }
  return { name: parts[0] ?? "", args: parts.slice(1), query: new URLSearchParams(qs) };
}

function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

let firstRender = true;

function render() {
  const route = parseHash();
  viewCtl.abort();
  viewCtl = new AbortController();

  if (PRIVATE.has(route.name) && !session) return toLogin();
  if (route.name === "" && session) return go("#/dashboard");

  const [title, fn] = ROUTES[route.name] ?? ["Page not found", viewNotFound];
  const v = makeView(title);
  document.getElementById("main").replaceChildren(v.root);
  document.title = route.name ? `${title} · cova` : "cova";
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.getAttribute("href") === `#/${route.name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!firstRender) v.heading.focus({ preventScroll: true });
  firstRender = false;
  window.scrollTo(0, 0);
  Promise.resolve().then(() => fn(v, route)).catch((err) => showError(v, err));
}

function viewNotFound(v) {
  v.add(h("p", {}, "There is no page here. ", h("a", { href: "#/", text: "Go to the start" })));
}

// ---------------------------------------------------------------- home (signed out)

function viewHome(v) {
  v.heading.textContent = "Every comment of a post, ready to read";
  v.add(
    h("p", { class: "lead", text: "cova collects the comments of TikTok, YouTube and Instagram posts with their replies. Search and export them, keep posts in a library, watch them for new comments, get alerts on keywords and let AI sum them up. Everything here is also one API call away." }),
    h("p", { class: "actions" },
      h("a", { href: "#/signup", class: "button primary", text: "Create an account" }),
      h("a", { href: "#/login", class: "button", text: "Log in" })),
    h("ul", { class: "features" },
      h("li", { text: "Comments and nested replies, sorted and searchable" }),
      h("li", { text: "CSV, JSON Lines and Excel exports" }),
      h("li", { text: "Posts watched for new comments, keyword and spike alerts to Telegram or a webhook" }),
      h("li", { text: "Sentiment, topics, questions and languages at a glance" })),
  );
  const url = h("input", { id: "anon-url", type: "text", inputmode: "url", autocomplete: "off", placeholder: "https://www.tiktok.com/@…/video/…" });
  const out = h("div", { id: "anon-preview", "aria-live": "polite" });
  const f = form("anon-form", [
    fieldRow("Post URL", url, "A TikTok, YouTube or Instagram post. No account needed, 10 previews a day."),
    h("div", { class: "buttons" }, h("button", { id: "anon-submit", type: "submit", class: "primary", text: "Preview" })),
  ], (btn) => busy(v, btn, async () => {
    out.replaceChildren();
    const md = await api("POST", "/metadata", { url: url.value.trim() }, { anonymous: true });
    out.append(previewCard(md, { anonymous: true }));
  }));
  v.add(card("Preview a post", f, out));
}

// ---------------------------------------------------------------- account: sign up, confirm, log in, reset

function viewSignup(v) {
  const email = h("input", { id: "signup-email", type: "email", autocomplete: "email", required: true });
  const pass = h("input", { id: "signup-password", type: "password", autocomplete: "new-password", required: true });
  const done = statusEl("signup-done");
  const f = form("signup-form", [
    fieldRow("E-mail", email),
    fieldRow("Password", pass, "10 to 128 characters; not a common password and not your e-mail's name."),
    h("div", { class: "buttons" }, h("button", { id: "signup-submit", type: "submit", class: "primary", text: "Sign up" })),
  ], (btn) => busy(v, btn, async () => {
    done.textContent = "";
    const r = await api("POST", "/auth/signup", { email: email.value.trim(), password: pass.value });
    done.textContent = r?.detail ?? "Check your e-mail for the confirmation link.";
    pass.value = "";
  }));
  v.add(card(null, f, done), h("p", {}, "Already have an account? ", h("a", { href: "#/login", text: "Log in" })));
}

async function viewConfirm(v, route) {
  const status = statusEl("confirm-status");
  const next = h("p", {});
  v.add(card(null, status, next));
  const token = route.args[0];
  if (!token) {
    status.textContent = "This confirmation link is incomplete.";
    return;
  }
  status.textContent = "Confirming…";
  try {
    const r = await api("POST", "/auth/confirm", { token });
    status.textContent = `Your e-mail address ${r.email} is confirmed.`;
    if (session) await loadSession(); // the session rotated: take its new CSRF token
  } catch (err) {
    if (isAbort(err)) return;
    // A used link opened by someone already signed in and confirmed: nothing is wrong.
    if (session?.account?.email_confirmed) {
      status.textContent = `Your e-mail address ${session.account.email} is already confirmed.`;
    } else {
      status.textContent = "The e-mail address could not be confirmed.";
      showError(v, err);
    }
  }
  next.append(session
    ? h("a", { href: "#/dashboard", text: "Go to the dashboard" })
    : h("a", { href: "#/login", text: "Log in" }));
}

function viewLogin(v) {
  const email = h("input", { id: "login-email", type: "email", autocomplete: "email", required: true });
  const pass = h("input", { id: "login-password", type: "password", autocomplete: "current-password", required: true });
  const f = form("login-form", [
    fieldRow("E-mail", email),
    fieldRow("Password", pass),
    h("div", { class: "buttons" },
      h("button", { id: "login-submit", type: "submit", class: "primary", text: "Log in" }),
      h("a", { href: "#/reset", text: "Forgot password?" })),
  ], (btn) => busy(v, btn, async () => {
    const s = await api("POST", "/auth/login", { email: email.value.trim(), password: pass.value });
    setSession(s);
    const next = sessionStorage.getItem(NEXT_KEY);
    sessionStorage.removeItem(NEXT_KEY);
    go(next?.startsWith("#/billing") ? next : "#/dashboard");
  }));
  v.add(card(null, f), h("p", {}, "New to cova? ", h("a", { href: "#/signup", text: "Create an account" })));
}

function viewReset(v, route) {
  const token = route.args[0];
  if (token) return viewResetConfirm(v, token);
  const email = h("input", { id: "reset-email", type: "email", autocomplete: "email", required: true });
  const done = statusEl("reset-done");
  const f = form("reset-form", [
    fieldRow("E-mail", email, "We send a link to set a new password. It is valid for one hour."),
    h("div", { class: "buttons" }, h("button", { id: "reset-submit", type: "submit", class: "primary", text: "Send the link" })),
  ], (btn) => busy(v, btn, async () => {
    done.textContent = "";
    const r = await api("POST", "/auth/reset", { email: email.value.trim() });
    done.textContent = r?.detail ?? "Check your e-mail for the link.";
  }));
  v.add(card(null, f, done), h("p", {}, h("a", { href: "#/login", text: "Back to log in" })));
}

function viewResetConfirm(v, token) {
  v.heading.textContent = "Choose a new password";
  const pass = h("input", { id: "reset-password", type: "password", autocomplete: "new-password", required: true });
  const status = statusEl("reset-confirm-status");
  const next = h("p", {});
  const f = form("reset-confirm-form", [
    fieldRow("New password", pass, "10 to 128 characters. Every session of the account is logged out."),
    h("div", { class: "buttons" }, h("button", { id: "reset-confirm-submit", type: "submit", class: "primary", text: "Set the password" })),
  ], (btn) => busy(v, btn, async () => {
    status.textContent = "";
    const r = await api("POST", "/auth/reset/confirm", { token, password: pass.value });
    status.textContent = r?.detail ?? "Your password is set.";
    pass.value = "";
    setSession(null); // every session of the account was revoked
    next.replaceChildren(h("a", { href: "#/login", text: "Log in with the new password" }));
  }));
  v.add(card(null, f, status, next));
}

async function logout() {
  try {
    await api("POST", "/auth/logout", undefined, { signal: null });
  } catch {
    // Signed out already, or the server is down: the page forgets the session either way.
  }
  setSession(null);
  go("#/login");
}

// ---------------------------------------------------------------- dashboard

async function viewDashboard(v) {
  const balance = card("This month");
  const limits = card("Limits");
  const latest = card("Latest analysis");
  v.add(h("div", { class: "grid" }, balance, limits), latest);
  await loadSession().catch(() => {}); // fresh free allowance and e-mail state
  if (session && !session.account.email_confirmed) {
    v.heading.after(h("p", { class: "notice", text: "Confirm your e-mail address (see the link we sent) to create API tokens." }));
  }
  await Promise.all([
    fillUsage(v, balance, limits).catch((err) => showError(v, err)),
    fillLatest(latest).catch((err) => showError(v, err)),
  ]);
}

// What the session can spend: this month's packs, then the free allowance (session jobs only).
function spendable(c) {
  return c.remaining + (session?.account?.free_comments_left ?? 0);
}

async function fillUsage(v, balance, limits) {
  const u = await api("GET", "/usage");
  const c = u.comments;
  const free = session?.account?.free_comments_left ?? 0;
  const total = spendable(c);
  const available = h("span", { id: "balance-available", "data-value": total, text: fmtNum(total) });
  // appendKids, not append: a condition that is false adds nothing (append would write "false").
  appendKids(balance, [
    h("p", { class: "big" }, available, h("span", { class: "unit", text: " comments available" })),
    free > 0 && h("p", { class: "muted", id: "balance-split", text: `${fmtNum(c.remaining)} from this month's packs and ${fmtNum(free)} from your free allowance (the allowance pays for collections started here, not with API tokens).` }),
    h("dl", { class: "facts" },
      h("dt", { text: "Granted (packs bought this month)" }), h("dd", { id: "balance-granted", text: fmtNum(c.limit) }),
      h("dt", { text: "Used" }), h("dd", { text: fmtNum(c.used) }),
      h("dt", { text: "Held by running jobs" }), h("dd", { text: fmtNum(c.reserved) }),
      h("dt", { text: "Expires" }), h("dd", { id: "balance-expires" }, timeEl(c.expires_at)),
      h("dt", { text: "Free allowance left" }), h("dd", { id: "free-left", text: fmtNum(session?.account?.free_comments_left) })),
    h("p", { class: "buttons" },
      h("a", { href: "#/analyze", class: "button primary", text: "Analyze a post" }),
      h("a", { href: "#/billing", class: "button", text: "Buy comments" })),
  ]);
  const m = u.metadata;
  limits.append(h("dl", { class: "facts" },
    h("dt", { text: "Metadata lookups" }),
    h("dd", { text: `${fmtNum(m.remaining)} of ${fmtNum(m.limit)} left` + (m.resets_in_seconds ? `, full again in ${Math.ceil(m.resets_in_seconds / 60)} min` : "") }),
    h("dt", { text: "Requests" }), h("dd", { text: `${fmtNum(u.requests.remaining)} of ${fmtNum(u.requests.limit)} per minute` }),
    h("dt", { text: "Analyses running" }), h("dd", { text: `${fmtNum(u.concurrency.running)} of ${fmtNum(u.concurrency.limit)}` }),
    h("dt", { text: "API tokens" }), h("dd", { text: `${fmtNum(u.tokens.active)} of ${fmtNum(u.tokens.limit)}` }),
    h("dt", { text: "Most comments per post" }), h("dd", { text: fmtNum(c.per_post_limit) })));
}

async function fillLatest(box) {
  let s;
  try {
    s = await api("GET", "/analyses/session");
  } catch (err) {
    if (err.status !== 404) throw err;
    // This session started nothing yet: the account's latest collection, from any session or token.
    const recent = (await api("GET", "/analyze?limit=1")).items[0];
    if (!recent) {
      box.append(h("p", { class: "muted", id: "latest-none" }, "No analysis yet. ", h("a", { href: "#/analyze", text: "Analyze a post" })));
      return;
    }
    s = { ref: recent.ref, job: recent, metadata: recent.post, saved_at: null, status: null };
    box.append(h("p", { class: "muted", text: "Your latest collection (you started none since you logged in):" }));
  }
  const job = s.job ?? {};
  box.append(
    h("p", { class: "latest-title", id: "latest-title", text: postTitle(s.metadata, s.ref) }),
    h("dl", { class: "facts" },
      h("dt", { text: "Post" }), h("dd", {}, h("code", { text: s.ref })),
      h("dt", { text: "Job" }), h("dd", { text: inWords(job.status) }),
      h("dt", { text: "Started" }), h("dd", {}, timeEl(job.created_at)),
      s.status != null && h("dt", { text: "In the library" }), s.status != null && h("dd", { text: s.saved_at ? "yes" : "no" })),
    h("p", { class: "buttons" },
      h("a", { id: "latest-link", href: hashFor("analyze", { job: job.job_id }), class: "button", text: "Open" }),
      s.status === "ready" && h("a", { href: hashFor("ai", { ref: s.ref }), class: "button", text: "AI analysis" })),
  );
}

// ---------------------------------------------------------------- post preview card

function previewCard(md, { anonymous = false } = {}) {
  const el = h("article", { class: "card preview" });
  const cover = (md.media ?? []).find((m) => m.type === "cover" && isOwnMedia(m.url));
  // cova's image copies need the account; an anonymous preview shows none.
  if (cover && !anonymous) {
    const img = h("img", { class: "cover", src: cover.url, alt: "Cover of the post", loading: "lazy", width: cover.width, height: cover.height });
    img.addEventListener("error", () => img.remove());
    el.append(img);
  }
  const a = md.author ?? {};
  const link = safeHttpUrl(md.url);
  el.append(h("div", { class: "preview-body" },
    h("h2", { class: "preview-title", text: postTitle(md, md.ref) }),
    h("p", { class: "muted" }, `${platformName(md.platform)} · ${md.kind ?? "post"}`, md.created_at && " · ", md.created_at && timeEl(md.created_at)),
    h("p", { class: "preview-author" },
      h("strong", { text: a.handle ? `@${a.handle}` : (a.name ?? "unknown author") }),
      a.handle && a.name ? ` ${a.name}` : "", a.verified ? " ✓" : "",
      a.followers != null ? ` · ${plural(a.followers, "follower")}` : ""),
    md.description && md.title ? h("p", { class: "preview-description", text: md.description }) : null,
    h("dl", { class: "stats" },
      h("div", {}, h("dt", { text: "Comments" }), h("dd", { class: "preview-comments", text: fmtNum(md.metrics?.comments) })),
      h("div", {}, h("dt", { text: "Views" }), h("dd", { text: fmtNum(md.metrics?.views) })),
      h("div", {}, h("dt", { text: "Likes" }), h("dd", { text: fmtNum(md.metrics?.likes) })),
      h("div", {}, h("dt", { text: "Shares" }), h("dd", { text: fmtNum(md.metrics?.shares) }))),
    md.hashtags?.length ? h("p", { class: "tags", text: md.hashtags.map((t) => `#${t.name}`).join(" ") }) : null,
    h("p", { class: "muted" }, h("code", { text: md.ref }),
      link && " · ", link && h("a", { href: link, target: "_blank", rel: "noopener noreferrer", text: "Open the post" })),
  ));
  return el;
}

// ---------------------------------------------------------------- analyze

// The URLs of the field: one per line, or pasted as a list (spaces or commas between them).
// A line whose words are not all links stays one entry, so that "hello there" is refused once
// as not a link rather than as two.
const looksLikeLink = (w) => /^(https?:\/\/|www\.)|^[\w-]+(\.[\w-]+)+\//i.test(w);
function urlsOf(text) {
  return text.split(/\n+/).flatMap((line) => {
    const words = line.split(/[\s,]+/).filter(Boolean);
    return words.length > 1 && !words.every(looksLikeLink) ? [line.trim()] : words;
  }).filter(Boolean);
}

async function viewAnalyze(v, route) {
  const url = h("textarea", { id: "analyze-url", rows: 2, inputmode: "url", autocomplete: "off", spellcheck: "false", placeholder: "https://www.tiktok.com/@…/video/…" });
  const previewBox = h("div", { id: "preview-box", "aria-live": "polite" });
  const job = jobPanel();
  const batchBox = h("div", { id: "batch-box" });
  const results = h("div", { id: "results" });
  const collect = h("button", { id: "analyze-submit", type: "submit", class: "primary", text: "Collect comments" });
  // Checked by the page itself, so that a wrong value is answered in words.
  const max = h("input", { id: "analyze-max", type: "text", inputmode: "numeric", autocomplete: "off", placeholder: fmtNum(LIMITS.comments_per_post) });

  // A new request starts from a clean page: nothing of the previous post stays under it.
  const clearPage = () => {
    previewBox.replaceChildren();
    batchBox.replaceChildren();
    results.replaceChildren();
    job.el.hidden = true;
    ++job.gen; // a job still being followed stops drawing
  };
  const f = form("analyze-form", [
    fieldRow("Post URLs", url, `One TikTok, YouTube or Instagram post, or up to ${fmtNum(LIMITS.batch_urls)} (one per line). Collecting spends one comment of your balance per comment. Enter collects; Shift+Enter starts a new line.`),
    fieldRow("At most this many comments per post", max, `Optional. Each post is collected, and paid for, up to this many comments (replies included); empty collects up to ${fmtNum(LIMITS.comments_per_post)}.`),
    h("div", { class: "buttons" },
      h("button", { id: "preview-submit", type: "submit", text: "Preview the cost" }), collect),
  ], (btn) => {
    const urls = urlsOf(url.value);
    const cap = capOf(max);
    if (cap === undefined) {
      showError(v, { detail: `The limit of comments per post must be a whole number from 1 to ${fmtNum(LIMITS.comments_per_post)}, or empty.` });
      return;
    }
    clearPage();
    if (btn?.id === "preview-submit") {
      return urls.length > 1 ? previewList(v, btn, urls, cap, previewBox) : preview(v, btn, urls, cap, previewBox);
    }
    if (urls.length > 1) return startBatch(v, btn, urls, cap, batchBox);
    return startAnalysis(v, btn, urls[0] ?? "", cap, job, results);
  });
  // Enter runs the highlighted action, Collect; a list is pasted or typed with Shift+Enter.
  url.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      f.requestSubmit(collect);
    }
  });
  v.add(card(null, f), previewBox, job.el, batchBox, results);

  const jobId = route.query.get("job");
  const ref = route.query.get("ref");
  const batchId = route.query.get("batch");
  if (jobId) await followJob(v, jobId, job, results);
  else if (batchId) await followBatch(v, batchId, batchBox);
  else if (ref) await showSavedBreakdown(v, ref, results, route.query.get("comment"));
}

// The limit of comments per post typed in `input`: null when empty, undefined when invalid.
function capOf(input) {
  const raw = input.value.trim().replace(/[\s,.](?=\d{3}\b)/g, "");
  if (!raw) return null;
  if (!/^\d+$/.test(raw)) return undefined;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 1 && n <= LIMITS.comments_per_post ? n : undefined;
}

// The body of a collection: the cap only when one is set.
const withCap = (body, cap) => (cap ? { ...body, max_comments: cap } : body);

// The post's card, and what collecting it would cost against what can be spent.
async function preview(v, btn, urls, cap, box) {
  await busy(v, btn, async () => {
    const [md, usage] = await Promise.all([api("POST", "/metadata", { url: urls[0] ?? "" }), api("GET", "/usage").catch(() => null)]);
    box.append(h("div", { id: "preview" }, previewCard(md), usage && costLine(md, usage.comments, cap)));
  });
}

// A list's cost before it starts: each post's size, the total, and how many posts the balance
// covers whole. The counts cova does not know yet arrive while the page asks again.
async function previewList(v, btn, urls, cap, box) {
  if (urls.length > LIMITS.batch_urls) {
    showError(v, { detail: `A list holds at most ${fmtNum(LIMITS.batch_urls)} post URLs; this one has ${fmtNum(urls.length)}. Split it.` });
    return;
  }
  const ask = () => api("POST", "/analyze/batch/preview", withCap({ urls }, cap));
  let p = await busy(v, btn, ask);
  let shown = null;
  while (p) {
    const drawn = listPreviewCard(p);
    if (shown) shown.replaceWith(drawn); else box.append(drawn);
    shown = drawn;
    // Asked again while some posts are being counted and the page still shows this list.
    if (!p.counting || !drawn.isConnected) return;
    await new Promise((done) => setTimeout(done, PREVIEW_POLL_MS));
    if (!drawn.isConnected) return;
    p = await ask().catch((err) => {
      showError(v, err);
      return null;
    });
  }
}

// How often a list preview asks again while posts are being counted.
const PREVIEW_POLL_MS = 2000;

function listPreviewCard(p) {
  const t = table("list-preview-table", ["Post", "Comments", "Costs at most", "Your balance"], "What each post of the list costs");
  for (const item of p.items) {
    const why = item.same_as != null
      ? `the same post as line ${fmtNum(item.same_as + 1)}: collected once`
      : item.comments_off ? "its author turned the comments off: nothing to collect"
      : item.error ? plainWords(item.error.detail) : null;
    const count = item.counting ? h("span", { class: "muted counting", text: "counting…" })
      : item.comments == null ? h("span", { class: "muted", text: "not counted" }) : fmtNum(item.comments);
    t.tbody.append(row(t.headers, [
      h("div", {}, h("span", { class: "batch-url", text: truncate(item.url, 70) }), item.ref && h("br"), item.ref && h("code", { class: "ref", text: item.ref })),
      count,
      item.charge_at_most == null ? "—" : plural(item.charge_at_most, "comment"),
      h("div", {}, item.covered ? h("span", { class: "covered", text: "covered" })
        : item.charge_at_most > 0 ? h("span", { class: "not-covered", text: "not covered whole" }) : "—",
      why && h("small", { class: "muted preview-why", text: ` ${why}` })),
    ], { "data-position": item.position, class: item.covered ? "covered" : null }));
  }
  const uncounted = p.posts - p.counted - p.counting;
  const enough = p.covered_whole >= p.counted;
  const summary = h("p", { id: "list-preview-summary", class: enough ? "notice" : "notice warning" },
    `${plural(p.posts, "post")}, ${plural(p.total_comments, "comment")} counted` +
    (p.max_comments ? `, at most ${fmtNum(p.charge_at_most)} collected with your limit of ${fmtNum(p.max_comments)} per post` : "") +
    `. You have ${fmtNum(p.available)}: ` +
    (enough ? `enough for every counted post.` : `enough for ${plural(p.covered_whole, "post")} of ${fmtNum(p.counted)} whole, in list order; the others are cut where your balance ends, or not started.`) +
    (p.counting > 0 ? ` Counting ${plural(p.counting, "more post")}: the counts appear here as they arrive.` : "") +
    (uncounted > 0 ? ` ${plural(uncounted, "post")} could not be counted (see below).` : ""),
    !enough ? h("a", { href: "#/billing", text: " Buy a comment pack" }) : null);
  const c = card("What the list costs", summary, h("div", { class: "table-wrap" }, t.el));
  c.id = "list-preview";
  return c;
}

function costLine(md, c, max) {
  const have = spendable(c);
  const reported = md.metrics?.comments;
  const cap = Math.min(c.per_post_limit, max ?? c.per_post_limit);
  let text;
  if (reported == null) {
    text = `The platform does not say how many comments this post has. You have ${fmtNum(have)}: collection stops at ${fmtNum(Math.min(have, cap))}.`;
  } else {
    const wanted = Math.min(reported, cap);
    const about = `About ${plural(reported, "comment")}${reported > cap ? ` (at most ${fmtNum(cap)} are collected${max ? " with your limit" : " per post"})` : ""}`;
    text = have >= wanted
      ? `${about}; you have ${fmtNum(have)}: enough to collect ${reported > cap ? "the first " + fmtNum(cap) : "them all"}.`
      : `${about}; you have ${fmtNum(have)}: collection stops at ${fmtNum(have)}.`;
  }
  return h("p", { id: "cost-preview", class: have > 0 ? "notice" : "notice warning" }, text,
    have <= 0 ? h("a", { href: "#/billing", text: " Buy a comment pack" }) : null);
}

function jobPanel() {
  const status = h("span", { id: "analyze-status", class: "job-status", role: "status", "aria-live": "polite" });
  const bar = h("progress", { id: "analyze-progress", max: 1 });
  const count = h("span", { id: "analyze-count", class: "muted" });
  const el = h("section", { class: "card job", hidden: true, "aria-label": "Collection job" },
    h("p", { class: "job-line" }, "Status: ", status), bar, h("p", {}, count));
  return { el, status, bar, count, gen: 0 };
}

// Each followed job gets a generation; a newer job makes the older loop stop quietly.
function supersededCheck(holder) {
  const gen = ++holder.gen;
  return () => {
    if (gen !== holder.gen) throw new DOMException("A newer job replaced this one.", "AbortError");
  };
}

function drawProgress(ui, job) {
  ui.el.hidden = false;
  // The final states read as themselves; the others as what is happening.
  const waiting = job.progress?.waiting_for === "balance";
  ui.status.textContent = waiting ? "waiting for your comment balance" : inWords(job.status);
  ui.status.dataset.status = waiting ? "waiting_balance" : job.status;
  const got = job.progress?.comments_collected ?? 0;
  const expected = job.progress?.comments_expected;
  // What this job can reach: the post's count, or the job's own cap when that is lower.
  const target = expected == null ? null : Math.min(expected, job.max_comments ?? expected);
  // A failed job has nothing left to show progress of: no bar, moving or not.
  ui.bar.hidden = job.status === "failed";
  if (job.status === "complete") {
    const max = Math.max(got, 1);
    ui.bar.max = max;
    ui.bar.value = max;
  } else if (target == null) {
    ui.bar.removeAttribute("value"); // indeterminate until the scraper has read the post
  } else {
    ui.bar.max = Math.max(target, 1);
    ui.bar.value = Math.min(got, target);
  }
  ui.count.textContent = progressWords(job);
}

// What a job's panel says of its comments: how many of how many, and why it stopped short.
function progressWords(job) {
  const got = job.progress?.comments_collected ?? 0;
  const expected = job.progress?.comments_expected;
  const target = expected == null ? null : Math.min(expected, job.max_comments ?? expected);
  if (job.status === "failed") return "The collection did not finish, and nothing was charged. The reason is above.";
  if (job.result?.comments_off) return COMMENTS_OFF;
  if (job.progress?.waiting_for === "balance") {
    return `This post has about ${plural(expected ?? 0, "comment")}, more than your balance has left while your other collections run. It starts as soon as they finish and give back what they did not use; if the balance is still short then, it collects what is left.`;
  }
  if (job.status === "complete") return `${plural(got, "comment")} collected${finishedWords(job, got)}.`;
  if (target == null) return `${plural(got, "comment")} collected`;
  if (target < expected) return `${fmtNum(got)} of at most ${plural(target, "comment")} (your limit per post)`;
  return `${fmtNum(got)} of about ${plural(target, "comment")}`;
}

// A list row's count: collected, and while running, of what the job can reach.
function listCountWords(item) {
  const j = item.job;
  const p = j?.progress;
  if (!p) return "—";
  if (p.comments_expected == null || item.state === "complete") return fmtNum(p.comments_collected);
  return `${fmtNum(p.comments_collected)} of ${fmtNum(Math.min(p.comments_expected, j.max_comments ?? p.comments_expected))}`;
}

// A post's own count as the API reports it: capped at the per-post limit, so the cap reads as
// "or more" (a post of 8,400 comments reports 5,000).
function postCount(expected) {
  return expected >= LIMITS.comments_per_post ? `${fmtNum(expected)} or more` : fmtNum(expected);
}

// After "N comments collected": why a finished job has fewer than its post, in words.
function finishedWords(job, got) {
  const r = job.result ?? {};
  const expected = job.progress?.comments_expected;
  if (r.truncated) return ` — ${cutWords({ truncated_reason: r.truncated_reason ?? "balance", job })}`;
  return expected != null && got < expected ? ` of the post's ${postCount(expected)}` : "";
}

async function startAnalysis(v, btn, url, cap, ui, results) {
  const job = await busy(v, btn, () => api("POST", "/analyze", withCap({ url }, cap)));
  if (!job) return;
  // The job id in the address lets a reload pick the job up again.
  history.replaceState(null, "", hashFor("analyze", { job: job.job_id }));
  results.replaceChildren();
  await followJob(v, job.job_id, ui, results, job);
  // The API answered with a collection already made or under way: say so, so that its count
  // of new comments is not read as a charge made now.
  const reused = REUSED_WORDS[job.deduplicated];
  if (reused) results.prepend(h("p", { class: "notice", id: "reused-note", text: reused(job) }));
}

// What an answer with an existing collection means for the person who asked again.
const REUSED_WORDS = {
  recent_result: (job) => `This post was collected ${job.finished_at ? `at ${new Date(job.finished_at).toLocaleTimeString()}` : "a moment ago"}: these are that collection's comments, and nothing was charged again.`,
  in_flight: () => "This post was already being collected: these are that collection's comments, and nothing is charged twice.",
};

async function followJob(v, jobId, ui, results, first) {
  const path = `/analyze/${encodeURIComponent(jobId)}`;
  const live = supersededCheck(ui);
  try {
    let job = first;
    if (first) drawProgress(ui, first);
    if (!first || !["complete", "failed"].includes(first.status)) {
      job = await poll(`${path}?limit=1`, (j) => j.status === "complete" || j.status === "failed", (j) => {
        live();
        drawProgress(ui, j);
      });
    }
    if (job.status === "failed") {
      showError(v, job.error ?? { detail: "The job failed." });
      return;
    }
    const [full, entry] = await Promise.all([api("GET", path), savedEntry(job.ref)]);
    live();
    drawProgress(ui, full);
    renderJobResult(v, full, results, entry);
  } catch (err) {
    showError(v, err);
  }
}

// The library entry of a post, or null when it is not in the library.
async function savedEntry(ref) {
  try {
    return await api("GET", `/analyses/${refPath(ref)}?limit=1`);
  } catch (err) {
    if (err.status === 404) return null;
    throw err;
  }
}

function truncationWords(r) {
  if (!r.truncated) return "";
  if (r.truncated_reason === "post_cap") return ` — stopped at ${inWords("post_cap")}: the post has more`;
  if (r.truncated_reason === "max_comments") return ` — stopped at ${inWords("max_comments")}: the post has more`;
  if (r.truncated_reason === "visitor_view") return " — Instagram shows a visitor only part of a post's comments, about the first 15 and none of their replies: these are all it showed, and only they were charged. Refreshing the post later collects what Instagram shows then";
  if (r.truncated_reason === "platform_stopped") return " — the platform stopped handing out this post's comments before its last one: these are all it gave, and only they were charged. Refreshing the post later may bring the rest";
  return ` — stopped by ${inWords("balance")}: buy a pack and refresh the post for the rest`;
}

// Why a list's post was cut, with what it collected against the post's own count.
function cutWords(item) {
  const p = item.job?.progress ?? {};
  const of = p.comments_expected != null ? ` (${fmtNum(p.comments_collected)} of its ${postCount(p.comments_expected)})` : "";
  switch (item.truncated_reason) {
    case "balance": return `cut short: your comment balance ran out${of}`;
    case "max_comments": return `stopped at your limit per post${of}`;
    case "post_cap": return `stopped at the 5,000-comment limit per post${of}`;
    case "visitor_view": return `only the part of its comments Instagram shows a visitor, without replies${of}; every comment shown was collected and only they were charged`;
    case "platform_stopped": return `the platform stopped handing out its comments early${of}; refresh it later for the rest`;
    default: return item.comments_off ? "its author turned the comments off: nothing to collect, nothing charged" : null;
  }
}

function renderJobResult(v, job, results, entry) {
  const r = job.result;
  results.replaceChildren();
  if (r.released) {
    results.append(card(null, h("p", {}, "These comments were replaced by a later collection of the post, or removed. ",
      h("a", { href: hashFor("analyze", { ref: r.analysis_id }), text: "Open the current comments" }))));
    return;
  }
  const saveStatus = statusEl("save-status", "span");
  const extra = [];
  if (entry?.saved_at) {
    saveStatus.textContent = "In your library.";
    extra.push(saveStatus);
  } else {
    const save = h("button", { id: "save-analysis", type: "button", text: "Save to library" });
    save.addEventListener("click", () => busy(v, save, async () => {
      await api("POST", `/analyses/${refPath(r.analysis_id)}/save`);
      saveStatus.textContent = "Saved to your library.";
      save.remove();
      hint.remove();
    }));
    extra.push(save, saveStatus);
  }
  const hint = h("p", { class: "hint", id: "save-hint", text: "AI analysis and watching need the post in your library: save it first." });
  const note = r.comments_off
    ? h("p", { class: "muted", id: "result-note", text: COMMENTS_OFF })
    : h("p", { class: "muted", id: "result-note" },
      `${plural(r.comments_total, "comment")} collected`,
      r.comments_new != null ? `, ${fmtNum(r.comments_new)} new (charged)` : "",
      h("span", { id: "truncation", text: truncationWords(r) }), ".");
  results.append(commentsPanel(r.analysis_id, r.comments, {
    note, extra, jobId: job.job_id, exportHint: entry?.saved_at ? null : hint,
  }));
}

async function showSavedBreakdown(v, ref, results, focus) {
  const entry = await api("GET", `/analyses/${refPath(ref)}`);
  results.replaceChildren();
  if (entry.metadata) results.append(previewCard({ ...entry.metadata, ref: entry.ref }));
  if (entry.status !== "ready") {
    results.append(card(null, h("p", {}, `This entry has no comments kept (${inWords(entry.status)}). Refresh it from the `,
      h("a", { href: "#/library", text: "library" }), " to collect them again.")));
    return;
  }
  const c = entry.counts;
  const history = card("Collections and AI runs", h("p", { class: "muted", text: "Loading…" }));
  history.id = "entry-history";
  results.append(commentsPanel(entry.ref, entry.comments, {
    note: `${plural(c.comments, "comment")}: ${fmtNum(c.top_level)} top-level, ${fmtNum(c.replies)} replies, ${fmtNum(c.new)} new since the collection before. Kept until ${fmtDate(entry.expires_at)}.`,
    newSince: entry.last_scraped_at,
    focus,
  }), history);
  fillEntryHistory(history, entry).catch((err) => showError(v, err));
  const spikes = spikeSettingsForm(v, { prefix: "post-spike", ref: entry.ref, what: "post" });
  const spikesBox = card("Spike alerts for this post", spikes.el);
  spikesBox.id = "post-spikes";
  results.append(spikesBox);
  spikes.load().catch((err) => showError(v, err));
}

// A library entry's scrapes (new comments per refresh) and AI runs (with sentiment over time).
async function fillEntryHistory(box, entry) {
  const ref = entry.ref;
  const [scrapes, runs] = await Promise.all([
    api("GET", `/analyze?ref=${encodeURIComponent(ref)}&status=complete&limit=100`),
    api("GET", `/ai/jobs?ref=${encodeURIComponent(ref)}&limit=100`),
  ]);
  box.replaceChildren(h("h2", { text: "Collections and AI runs" }));
  const points = scrapes.items.filter((j) => j.finished_at && j.comments_new != null)
    .map((j) => ({ x: Date.parse(j.finished_at), y: j.comments_new }));
  if (points.length > 1 || entry.watch?.enabled) {
    box.append(CovaChart.series("New comments per collection", [{ name: "New comments", cls: "new", points }], { id: "chart-refreshes" }));
  }
  const t = table("ai-runs", ["Started", "Tasks", "Charge", "Status", ""], "AI runs of this post");
  for (const run of runs.items) {
    t.tbody.append(row(t.headers, [timeEl(run.created_at), tasksInWords(run.tasks), plural(run.charge ?? 0, "comment"), inWords(run.status),
      run.links ? h("a", { href: hashFor("ai", { ref, job: run.id }), text: "Open the result" }) : "—"], { "data-id": run.id }));
  }
  if (!runs.items.length) t.tbody.append(emptyRow(t.headers, "No AI run yet."));
  box.append(h("h3", { text: "AI runs" }), h("div", { class: "table-wrap" }, t.el),
    h("p", { class: "buttons" }, h("a", { href: hashFor("ai", { ref }), class: "button", text: "Run an AI analysis" })));
  // Sentiment over time, from the runs that measured it (the latest ten).
  const measured = runs.items.filter((r) => r.status === "complete" && (r.tasks ?? []).includes("sentiment")).slice(0, 10);
  if (measured.length) {
    const full = await Promise.all(measured.map((r) => api("GET", `/ai/jobs/${encodeURIComponent(r.id)}`)));
    const at = (key) => full.filter((x) => x.result?.sentiment).map((x) => ({ x: Date.parse(x.finished_at), y: x.result.sentiment[key] }));
    box.append(CovaChart.series("Sentiment over time", [
      { name: "Positive", cls: "positive", points: at("positive") },
      { name: "Negative", cls: "negative", points: at("negative") },
    ], { id: "chart-sentiment-time", format: fmtPct, yMax: 1 }));
  }
}

// ---------------------------------------------------------------- batches

async function startBatch(v, btn, urls, cap, box) {
  if (urls.length > LIMITS.batch_urls) {
    showError(v, { detail: `A list holds at most ${fmtNum(LIMITS.batch_urls)} post URLs; this one has ${fmtNum(urls.length)}. Split it.` });
    return;
  }
  const batch = await busy(v, btn, () => api("POST", "/analyze/batch", withCap({ urls }, cap)));
  if (!batch) return;
  history.replaceState(null, "", hashFor("analyze", { batch: batch.batch_id }));
  await followBatch(v, batch.batch_id, box, batch);
}

async function followBatch(v, id, box, first) {
  const t = table("batch", ["Post", "State", "Comments", ""], "The list's posts");
  const summary = h("p", { id: "batch-summary", class: "status", role: "status", "aria-live": "polite" });
  const cancel = h("button", { id: "batch-cancel", type: "button", class: "danger", text: "Stop the list" });
  cancel.addEventListener("click", () => busy(v, cancel, async () => {
    draw(await api("POST", `/analyze/batch/${encodeURIComponent(id)}/cancel`));
  }));
  box.replaceChildren(card("Your list", summary, h("div", { class: "table-wrap" }, t.el),
    h("p", { class: "hint", text: `Three of your collections run at a time; the others wait and start as those finish. Each is paid when it starts. When your balance cannot cover a post while other collections run, it waits for what they give back; a post is cut short only where your balance really ends, and the posts after it are not started. Stopping the list starts nothing more (nothing is charged for what did not start).` }),
    h("p", { class: "buttons" }, cancel)));
  const draw = (b) => {
    const n = b.counts;
    summary.textContent = `${fmtNum(n.complete)} complete, ${fmtNum(n.running)} collecting, ${fmtNum(n.waiting)} waiting` +
      (n.failed ? `, ${fmtNum(n.failed)} failed` : "") + (n.refused ? `, ${fmtNum(n.refused)} not started` : "") +
      (n.cancelled ? `, ${fmtNum(n.cancelled)} cancelled` : "") + (b.finished_at ? ". The list is done." : ".");
    cancel.hidden = b.status !== "running";
    t.tbody.replaceChildren(...b.items.map((item) => {
      const j = item.job;
      const why = item.error ?? j?.error;
      const waiting = j?.progress?.waiting_for === "balance";
      const state = h("span", { class: `state state-${item.state}`, "data-state": item.state, text: waiting ? "waiting for your balance" : inWords(item.state) });
      const cut = cutWords(item);
      return row(t.headers, [
        h("div", {}, h("span", { class: "batch-url", text: truncate(item.url, 70) }), item.ref && h("br"), item.ref && h("code", { class: "ref", text: item.ref })),
        h("div", {}, state, why && h("small", { class: "muted batch-why", text: ` ${plainWords(why.detail)}` }),
          cut && h("small", { class: "batch-cut", text: ` ${cut}` })),
        listCountWords(item),
        j && item.state === "complete" ? h("a", { class: "batch-open", href: hashFor("analyze", { job: j.job_id }), text: "Open" }) : "",
      ], { "data-position": item.position });
    }));
  };
  try {
    if (first) draw(first);
    await poll(`/analyze/batch/${encodeURIComponent(id)}`, (b) => b.finished_at != null, draw);
  } catch (err) {
    showError(v, err);
  }
}

// ---------------------------------------------------------------- comments

// The comment browser: threads or a table, search with the matches marked, filters, sorting,
// a chart of when the comments were written, exports. `jobId` exports the job's own comments;
// without it, the library entry's. `newSince`: comments first seen at or after it are new.
// The table draws only the rows in view (a post has up to 5,000 comments); each comment's sort
// keys and search text are computed once, so sorting and filtering never re-read the JSON.
function commentsPanel(ref, comments, { note, extra = [], exportHint, jobId, newSince, focus } = {}) {
  performance.mark("cova:comments-start");
  currentRef = ref ?? "";
  const flat = comments.flatMap((c) => [c, ...(c.replies ?? [])]);
  for (const c of flat) keysOf(c);
  const search = h("input", { id: "comments-search", type: "search", placeholder: "Text or author", autocomplete: "off" });
  const sort = h("select", { id: "comments-sort" },
    Object.entries(SORT_CHOICES).map(([value, [text]]) => h("option", { value, text })));
  const languages = [...new Set(flat.map((c) => c.language).filter(Boolean))].sort();
  const lang = h("select", { id: "filter-language" }, h("option", { value: "", text: "Any language" }),
    languages.map((l) => h("option", { value: l, text: l })));
  const latestSeen = newSince ?? flat.map((c) => c.first_seen_at).filter(Boolean).sort().at(-1);
  const flags = {
    new: ["New since the last collection", (c) => latestSeen && c.first_seen_at && c.first_seen_at >= latestSeen],
    pinned: ["Pinned", (c) => c.pinned],
    liked: ["Liked by the author", (c) => c.liked_by_author],
    replies: ["Has replies", (c) => (c.reply_count ?? 0) > 0],
    media: ["Has images", (c) => (c.media ?? []).length > 0],
  };
  const boxes = Object.fromEntries(Object.keys(flags).map((k) => [k, h("input", { id: `filter-${k}`, type: "checkbox" })]));
  const mode = h("select", { id: "comments-view" },
    h("option", { value: "threads", text: "Threads" }), h("option", { value: "table", text: "Table" }));
  // The view a person picked last time (a table reader keeps reading tables).
  mode.value = localStorage.getItem(VIEW_KEY) === "table" ? "table" : "threads";
  const count = statusEl("comments-count");
  const list = h("ul", { id: "comments", class: "comments" });
  const grid = table("comments-table", ["Time", "Author", "Comment", "Likes", "Replies", "Language"], "Comments");
  const gridWrap = h("div", { class: "table-wrap comments-scroller", hidden: true, tabindex: "0", "aria-label": "Comments table (scrolls)" }, grid.el);
  // Sortable headers: a click sorts by the column, a second click the other way; the sorted
  // column says so (aria-sort) and shows its direction.
  const columnSorts = ["time", "author", null, "likes", "replies", "language"];
  let order = { key: "platform", dir: 1 };
  const headers = grid.el.querySelectorAll("th");
  headers.forEach((th, i) => {
    const key = columnSorts[i];
    if (!key) return;
    const b = h("button", { type: "button", class: "link sort-by", "data-sort": key, text: th.textContent });
    b.addEventListener("click", () => {
      order = order.key === key ? { key, dir: -order.dir } : { key, dir: FIRST_DIRECTION[key] };
      // The menu offers every order a header gives, so that it always says the table's.
      const choice = Object.keys(SORT_CHOICES).find((c) => SORT_CHOICES[c][1] === key && SORT_CHOICES[c][2] === order.dir);
      if (choice) sort.value = choice;
      redraw();
    });
    th.replaceChildren(b, h("span", { class: "sort-arrow", "aria-hidden": "true" }));
  });
  const showOrder = () => headers.forEach((th, i) => {
    const on = columnSorts[i] && columnSorts[i] === order.key;
    if (on) th.setAttribute("aria-sort", order.dir > 0 ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
    const arrow = th.querySelector(".sort-arrow");
    if (arrow) arrow.textContent = on ? (order.dir > 0 ? " ▲" : " ▼") : "";
  });
  sort.addEventListener("change", () => {
    const [, key, dir] = SORT_CHOICES[sort.value];
    order = { key, dir };
    redraw();
  });
  const more = h("button", { id: "comments-more", type: "button", hidden: true, text: "Show more" });
  const base = jobId ? `${API}/analyze/${encodeURIComponent(jobId)}/export` : `${API}/analyses/${refPath(ref)}/export`;
  const exports = ["csv", "jsonl", "xlsx"].map((fmt) => h("a", {
    id: `export-${fmt}`, class: "button small", download: "",
    href: `${base}?format=${fmt}`, text: fmt === "jsonl" ? "JSON Lines" : fmt.toUpperCase(),
  }));

  let shown = [];
  let drawn = 0;
  let q = "";
  const rows = virtualRows(gridWrap, grid.el, grid.tbody, grid.headers.length, (c) => commentRow(c, q, grid.headers));
  const drawMore = () => {
    const next = shown.slice(drawn, drawn + COMMENTS_PAGE);
    list.append(...next.map(({ c, replies }) => commentItem(c, replies, q)));
    drawn += next.length;
    more.hidden = drawn >= shown.length;
  };
  const redraw = () => {
    performance.mark("cova:comments-redraw");
    q = search.value.trim().toLowerCase();
    const wanted = Object.entries(flags).filter(([k]) => boxes[k].checked).map(([, [, test]]) => test);
    const keep = (c) => (!q || keysOf(c).text.includes(q))
      && (!lang.value || c.language === lang.value) && wanted.every((test) => test(c));
    const asTable = mode.value === "table";
    list.hidden = asTable;
    gridWrap.hidden = !asTable;
    list.replaceChildren();
    showOrder();
    if (asTable) {
      shown = sortComments(flat, order).filter(keep);
      count.textContent = `Showing ${fmtNum(shown.length)} of ${plural(flat.length, "comment")}.`;
      more.hidden = true;
      rows.show(shown, shown.length ? null : "No comment matches.");
    } else {
      rows.show([], null);
      shown = filterThreads(sortComments(comments, order), keep);
      const n = shown.reduce((sum, t) => sum + (keep(t.c) ? 1 : 0) + t.replies.filter(keep).length, 0);
      count.textContent = `Showing ${fmtNum(n)} of ${plural(flat.length, "comment")} (${plural(shown.length, "thread")}).`;
      drawn = 0;
      drawMore();
    }
    // The time the comments took to reach the screen, in the browser's own timeline.
    requestAnimationFrame(() => setTimeout(() => performance.measure("cova:comments-drawn", "cova:comments-redraw"), 0));
  };
  let timer;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(redraw, 150); // one redraw when typing pauses, not one per key
  });
  mode.addEventListener("change", () => {
    localStorage.setItem(VIEW_KEY, mode.value);
    redraw();
  });
  for (const control of [lang, ...Object.values(boxes)]) control.addEventListener("change", redraw);
  more.addEventListener("click", drawMore);

  const times = flat.map((c) => keysOf(c).time).filter((t) => !Number.isNaN(t));
  const overTime = times.length ? CovaChart.timeline("Comments over time", times, { id: "chart-comments-time" }) : null;
  // The post's spikes, marked on the chart where they happened.
  if (overTime && ref) {
    api("GET", `/spike-alerts?${new URLSearchParams({ ref, limit: "500" })}`)
      .then((r) => CovaChart.mark(overTime, r.items.map((a) => ({
        start: Date.parse(a.window_start), end: Date.parse(a.window_end), kind: a.kind, label: spikeWords(a),
      }))))
      .catch((err) => console.warn("the post's spikes could not be read", err));
  }
  // What the spike checks can judge of a post in the library (a young post waits, and says so).
  const judging = h("p", { id: "spike-judging", class: "muted", hidden: true });
  if (ref) {
    api("GET", `/spike-alerts/settings/${encodeURIComponent(ref)}`)
      .then((s) => {
        if (!s.judging) return;
        judging.textContent = s.enabled ? spikeJudging(s.judging) : "Spike alerts are turned off for this post.";
        judging.hidden = false;
      })
      .catch((err) => {
        // A post outside the library has no spike checks: nothing to say.
        if (err.status !== 404) console.warn("the post's spike checks could not be read", err);
      });
  }

  const el = card("Comments",
    note && (typeof note === "string" ? h("p", { class: "muted", text: note }) : note),
    h("div", { class: "toolbar" },
      fieldRow("Search", search),
      fieldRow("Show as", mode),
      fieldRow("Sort", sort),
      fieldRow("Language", lang),
      h("div", { class: "field" }, h("span", { class: "label", text: "Export" }), h("div", { class: "buttons" }, exports))),
    h("fieldset", { class: "filters" }, h("legend", { text: "Only comments that are" }),
      Object.entries(flags).map(([k, [label]]) => checkRow(label, boxes[k]))),
    exportHint && (typeof exportHint === "string" ? h("p", { class: "hint", text: exportHint }) : exportHint),
    h("p", { class: "buttons" }, extra, h("a", { href: hashFor("ai", { ref }), class: "button", text: "AI analysis" })),
    overTime, judging, count, list, gridWrap, more);
  redraw();
  // A comment opened from the search: drawn (with the threads before it), marked and shown.
  if (focus) {
    // Threads show where the comment sits (the table view picked before stays the saved one).
    if (mode.value === "table") {
      mode.value = "threads";
      redraw();
    }
    const find = () => list.querySelector(`[data-id="${CSS.escape(focus)}"]`);
    while (!find() && drawn < shown.length) drawMore();
    const found = find();
    if (found) {
      found.classList.add("focused");
      found.tabIndex = -1;
      requestAnimationFrame(() => found.scrollIntoView({ block: "center" }));
    } else {
      count.textContent += " The comment you opened from the search is no longer among them: the post was collected again since.";
    }
  }
  return el;
}

// The orders the Sort menu offers: [words, key, direction (1 ascending, -1 descending)].
// Both directions of every sortable column, so that a header's second click has its words too.
const SORT_CHOICES = {
  platform: ["Platform order", "platform", 1],
  likes: ["Most liked", "likes", -1], "likes-least": ["Least liked", "likes", 1],
  replies: ["Most replies", "replies", -1], "replies-fewest": ["Fewest replies", "replies", 1],
  newest: ["Newest", "time", -1], oldest: ["Oldest", "time", 1],
  language: ["Language, A to Z", "language", 1], "language-desc": ["Language, Z to A", "language", -1],
  author: ["Author, A to Z", "author", 1], "author-desc": ["Author, Z to A", "author", -1],
};
// The direction a column's first click sorts in: the most, the newest, A to Z.
const FIRST_DIRECTION = { time: -1, author: 1, likes: -1, replies: -1, language: 1 };
const VIEW_KEY = "cova.commentsView";

// Each comment's sort keys and search text, computed once per comment.
const KEYS = new WeakMap();
function keysOf(c) {
  let k = KEYS.get(c);
  if (!k) {
    const a = c.author ?? {};
    k = {
      time: Date.parse(c.created_at),
      author: (a.handle ?? a.name ?? "").toLowerCase(),
      text: [c.text, a.handle, a.name].filter(Boolean).join("\n").toLowerCase(),
    };
    KEYS.set(c, k);
  }
  return k;
}

function sortComments(comments, { key, dir }) {
  const value = {
    likes: (c) => c.likes ?? 0,
    replies: (c) => c.reply_count ?? 0,
    time: (c) => keysOf(c).time || 0,
    language: (c) => c.language ?? "~",
    author: (c) => keysOf(c).author,
  }[key];
  const list = [...comments];
  if (!value) return dir < 0 ? list.reverse() : list;
  // Keys read once per comment; ties keep the platform's order (Array#sort is stable).
  const keyed = list.map((c, i) => [value(c), i]);
  const cmp = typeof keyed[0]?.[0] === "string" ? (x, y) => x.localeCompare(y) : (x, y) => x - y;
  keyed.sort((a, b) => dir * cmp(a[0], b[0]) || a[1] - b[1]);
  return keyed.map(([, i]) => list[i]);
}

// A table body that holds only the rows in view plus a few either side: each row is measured
// once when drawn, the others assumed at the measured average, and two spacer rows stand for
// the rest so that the scrollbar is true. Rows still in view stay in place while scrolling; only
// those coming into view are built. `scroller` is the element that scrolls.
function virtualRows(scroller, tableEl, tbody, columns, draw, overscan = 8) {
  let items = [];
  let heights = new Float64Array(0);
  let offsets = new Float64Array(1);
  let measured = 0, measuredTotal = 0;
  let range = [0, 0];
  let live = new Map(); // index → its row, for the rows in the page
  let stale = true; // offsets need summing again
  let queued = 0;
  const spacer = () => h("tr", { class: "spacer", "aria-hidden": "true" }, h("td", { colspan: columns }));
  const [above, below] = [spacer(), spacer()];
  const guess = () => (measured ? measuredTotal / measured : 44);
  const sums = () => {
    const g = guess();
    offsets = new Float64Array(items.length + 1);
    for (let i = 0; i < items.length; i++) offsets[i + 1] = offsets[i] + (heights[i] || g);
    stale = false;
  };
  const at = (y) => { // the first row whose bottom is below y
    let lo = 0, hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (offsets[mid + 1] <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const build = (i) => {
    const tr = draw(items[i]);
    tr.setAttribute("aria-rowindex", i + 2);
    tr.dataset.index = i;
    return tr;
  };
  // Images of rows that fly past during a scroll are not fetched: a row built while scrolling
  // gets its images once the scrolling pauses, if it is still in the page.
  let idle = 0;
  const holdImages = (tr) => {
    for (const img of tr.querySelectorAll("img[src]")) {
      img.dataset.src = img.getAttribute("src");
      img.removeAttribute("src");
    }
  };
  const settle = () => {
    for (const tr of live.values()) {
      for (const img of tr.querySelectorAll("img[data-src]")) {
        img.setAttribute("src", img.dataset.src);
        delete img.dataset.src;
      }
    }
  };
  const paint = (force = false, scrolling = false) => {
    queued = 0;
    if (!items.length || scroller.hidden) return;
    if (stale) sums();
    // Rows start under the table's header, which scrolls with them (sticky on top).
    const y = Math.max(0, scroller.scrollTop - (tableEl.tHead?.offsetHeight ?? 0));
    const view = scroller.clientHeight || innerHeight;
    const start = Math.max(0, at(y) - overscan);
    const end = Math.min(items.length, at(y + view) + 1 + overscan);
    if (!force && start === range[0] && end === range[1]) return;
    const fresh = [];
    const next = new Map();
    for (let i = start; i < end; i++) {
      let tr = live.get(i);
      if (!tr) {
        tr = build(i);
        if (scrolling) holdImages(tr);
        fresh.push([i, tr]);
      }
      next.set(i, tr);
    }
    for (const [i, tr] of live) if (!next.has(i)) tr.remove();
    if (!live.size || force || start >= range[1] || end <= range[0]) {
      tbody.replaceChildren(above, ...next.values(), below);
    } else {
      // Keep the rows that stay; put the new ones above or below them.
      const top = [], bottom = [];
      for (const [i, tr] of fresh) (i < range[0] ? top : bottom).push(tr);
      above.after(...top);
      below.before(...bottom);
    }
    live = next;
    range = [start, end];
    measure(fresh);
  };
  // Measures rows (one layout for all); the average sizes the rows never drawn.
  const measure = (rows) => {
    let changed = false;
    for (const [i, tr] of rows) {
      const hgt = tr.offsetHeight;
      if (!hgt || hgt === heights[i]) continue;
      if (heights[i]) measuredTotal -= heights[i];
      else measured += 1;
      measuredTotal += hgt;
      heights[i] = hgt;
      changed = true;
    }
    if (changed) sums();
    above.firstChild.style.height = `${offsets[range[0]]}px`;
    below.firstChild.style.height = `${offsets[items.length] - offsets[range[1]]}px`;
  };
  const schedule = (scrolling = false) => {
    if (!queued) queued = requestAnimationFrame(() => paint(false, scrolling));
  };
  scroller.addEventListener("scroll", () => {
    schedule(true);
    clearTimeout(idle);
    idle = setTimeout(settle, 150);
  }, { passive: true });
  // The listener goes with the view (its signal aborts on navigation).
  window.addEventListener("resize", () => { stale = true; schedule(); }, { passive: true, signal: viewCtl.signal });
  return {
    show(list, empty) {
      items = list;
      heights = new Float64Array(list.length);
      measured = 0;
      measuredTotal = 0;
      live = new Map();
      range = [0, 0];
      stale = true;
      tableEl.setAttribute("aria-rowcount", list.length + 1);
      scroller.scrollTop = 0;
      if (!list.length) {
        tbody.replaceChildren(...(empty ? [emptyRow(Array(columns).fill(""), empty)] : []));
        return;
      }
      paint(true);
      // Drawn before the panel joins the page, the rows are measured once it has, and more
      // are drawn if the measured rows leave room.
      requestAnimationFrame(() => {
        if (items !== list) return;
        measure(live);
        paint();
      });
    },
  };
}

// A thread is listed when its comment is kept (with all its replies) or one of its replies is
// (with the kept replies only).
function filterThreads(comments, keep) {
  const out = [];
  for (const c of comments) {
    const replies = c.replies ?? [];
    if (keep(c)) out.push({ c, replies });
    else {
      const kept = replies.filter(keep);
      if (kept.length) out.push({ c, replies: kept });
    }
  }
  return out;
}

// Text with every match of q marked (<mark>), built from text nodes: nothing is parsed as HTML.
function marked(text, q) {
  const out = h("span", { class: "comment-body" });
  if (!q) {
    out.textContent = text;
    return out;
  }
  const lower = text.toLowerCase();
  let at = 0;
  for (let i = lower.indexOf(q); i >= 0; i = lower.indexOf(q, i + q.length)) {
    out.append(text.slice(at, i), h("mark", { text: text.slice(i, i + q.length) }));
    at = i + q.length;
  }
  out.append(text.slice(at));
  return out;
}

function authorName(a) {
  return a.handle ? `@${a.handle}` : (a.name ?? "unknown");
}

function commentImages(c) {
  const imgs = (c.media ?? []).map((m, i) => thumb(m, `Image ${i + 1} of the comment`, "comment-image")).filter(Boolean);
  return imgs.length ? h("div", { class: "comment-images" }, imgs.map((img) => h("a", { href: img.getAttribute("src"), target: "_blank", rel: "noopener" }, img))) : null;
}

function commentItem(c, replies, q = "") {
  const isReply = replies === null;
  const a = c.author ?? {};
  const li = h("li", { class: isReply ? "comment reply" : "comment", "data-id": c.id },
    h("div", { class: "comment-head" },
      thumb(a.avatar, "", "avatar"),
      h("span", { class: "comment-author" }, marked(authorName(a), q)),
      a.handle && a.name ? h("span", { class: "muted", text: a.name }) : null,
      timeEl(c.created_at)),
    h("p", { class: "comment-text" }, marked(c.text ?? "", q)),
    commentImages(c),
    h("div", { class: "comment-meta" },
      h("span", { class: "likes", text: plural(c.likes ?? 0, "like") }),
      !isReply && (c.reply_count ?? 0) > 0 && h("span", { class: "muted reply-count", text: replyCountWords(c) }),
      c.pinned && h("span", { class: "badge", text: "pinned" }),
      c.liked_by_author && h("span", { class: "badge", text: "liked by the author" }),
      c.language && h("span", { class: "muted", text: c.language })));
  if (!isReply) li.append(h("ul", { class: "replies" }, replies.map((r) => commentItem(r, null, q))));
  return li;
}

// The post whose comments are shown (one comment browser at a time).
let currentRef = "";

// A comment's reply count; on an Instagram post whose replies were not shown to cova (the
// visitor's view), says so rather than leaving the count unexplained.
function replyCountWords(c) {
  const n = plural(c.reply_count, "reply", "replies");
  const noneShown = (c.replies ?? []).length === 0 && currentRef.startsWith("instagram:");
  return noneShown ? `${n} on Instagram, which shows no replies to a visitor` : n;
}

function commentRow(c, q, headers) {
  const a = c.author ?? {};
  return row(headers, [
    timeEl(c.created_at),
    h("span", { class: "comment-author" }, thumb(a.avatar, "", "avatar"), marked(authorName(a), q)),
    h("div", {}, c.parent_id && h("span", { class: "muted", text: "↳ " }), marked(c.text ?? "", q), commentImages(c),
      c.pinned && h("span", { class: "badge", text: "pinned" }), c.liked_by_author && h("span", { class: "badge", text: "liked by the author" })),
    fmtNum(c.likes ?? 0),
    // A reply has no replies of its own: a dash in the table, nothing on a phone's card.
    c.parent_id ? h("span", { class: "no-count", text: "—" }) : fmtNum(c.reply_count ?? 0),
    c.language ?? "—",
  ], { class: "comment-row", "data-id": c.id });
}

// ---------------------------------------------------------------- search

// Text with every word of `words` marked (<mark>), case-insensitively, built from text nodes.
function markedWords(text, words) {
  const out = h("span", { class: "comment-body" });
  const wanted = (words ?? []).map((w) => w.toLowerCase()).filter(Boolean);
  if (!wanted.length) {
    out.textContent = text;
    return out;
  }
  const lower = text.toLowerCase();
  let at = 0;
  for (;;) {
    let best = -1;
    let len = 0;
    for (const w of wanted) {
      let i = lower.indexOf(w, at);
      // Only where the text's own letters lower-case to the word (so the mark never shifts).
      while (i >= 0 && text.slice(i, i + w.length).toLowerCase() !== w) i = lower.indexOf(w, i + 1);
      if (i >= 0 && (best < 0 || i < best || (i === best && w.length > len))) {
        best = i;
        len = w.length;
      }
    }
    if (best < 0) break;
    out.append(text.slice(at, best), h("mark", { text: text.slice(best, best + len) }));
    at = best + len;
  }
  out.append(text.slice(at));
  return out;
}

// The search's parameters in the page's address (so a search can be bookmarked and shared).
const SEARCH_FIELDS = ["q", "platform", "since", "until", "language", "sentiment", "min_likes", "replies", "media", "author", "sort"];

// Every comment the account keeps, searched at once: the words, the filters, hits grouped by
// post or as one list, the matched words marked, each a link to its place in the post's thread.
async function viewSearch(v, route) {
  const q = h("input", { id: "search-q", type: "search", autocomplete: "off", maxlength: String(LIMITS.search_chars), placeholder: "refund, \"free shipping\", #sneakers, 🔥" });
  const choice = (id, any, options) => h("select", { id }, h("option", { value: "", text: any }),
    options.map(([value, text]) => h("option", { value, text })));
  const platform = choice("search-platform", "Any platform", Object.entries(PLATFORM_NAMES));
  const since = h("input", { id: "search-since", type: "date" });
  const until = h("input", { id: "search-until", type: "date" });
  const language = h("input", { id: "search-language", type: "text", autocomplete: "off", maxlength: "3", placeholder: "en, es, de…" });
  const sentiment = choice("search-sentiment", "Any sentiment", [["positive", "Positive"], ["neutral", "Neutral"], ["negative", "Negative"]]);
  const minLikes = h("input", { id: "search-min-likes", type: "text", inputmode: "numeric", autocomplete: "off", placeholder: "0" });
  const replies = choice("search-replies", "Both", [["exclude", "Top-level comments only"], ["only", "Replies only"]]);
  const media = choice("search-media", "Any", [["true", "With images"], ["false", "Without images"]]);
  const author = h("input", { id: "search-author", type: "text", autocomplete: "off", placeholder: "@handle" });
  const sort = h("select", { id: "search-sort" }, [["relevance", "Best match"], ["newest", "Newest"], ["likes", "Most liked"]]
    .map(([value, text]) => h("option", { value, text })));
  const group = h("select", { id: "search-group" }, h("option", { value: "post", text: "By post" }), h("option", { value: "list", text: "One list" }));
  group.value = localStorage.getItem("cova.searchGroup") === "list" ? "list" : "post";
  const status = statusEl("search-status");
  const hitsBox = h("div", { id: "search-hits", "aria-live": "polite" });
  const more = h("button", { id: "search-more", type: "button", hidden: true, text: "Show more" });
  const exportBox = h("div", { id: "search-export", class: "buttons", hidden: true });

  // The form's values as the API's parameters; a value the API would refuse is said in words.
  const params = () => {
    const p = new URLSearchParams();
    const text = q.value.trim();
    if (!text) throw { detail: "Type the words to search for." };
    p.set("q", text);
    if (platform.value) p.set("platform", platform.value);
    // Dates are whole days in the browser's time zone: from the start of `since` to the end of `until`.
    if (since.value) p.set("since", new Date(`${since.value}T00:00:00`).toISOString());
    if (until.value) {
      const [y, m, d] = until.value.split("-").map(Number);
      p.set("until", new Date(y, m - 1, d + 1).toISOString()); // the next midnight, whatever the day's length
    }
    if (since.value && until.value && since.value > until.value) throw { detail: "The first day comes after the last one: swap them." };
    const lang = language.value.trim().toLowerCase();
    if (lang) {
      if (!/^([a-z]{2}|und)$/.test(lang)) throw { detail: "A language is a two-letter code, such as en, es or de." };
      p.set("language", lang);
    }
    if (sentiment.value) p.set("sentiment", sentiment.value);
    const likes = minLikes.value.trim();
    if (likes) {
      if (!/^\d{1,15}$/.test(likes)) throw { detail: "The fewest likes must be a whole number, such as 10." };
      p.set("min_likes", likes);
    }
    if (replies.value) p.set("replies", replies.value);
    if (media.value) p.set("media", media.value);
    const who = author.value.trim().replace(/^@/, "");
    if (who) p.set("author", who);
    if (sort.value !== "relevance") p.set("sort", sort.value);
    return p;
  };

  let hits = [];
  let cursor = null;
  let asked = null;
  const draw = () => {
    if (!hits.length) {
      hitsBox.replaceChildren(h("p", { class: "muted", text: "No kept comment matches. Try fewer words or filters; only the posts in your library, while their comments are kept, are searched." }));
      return;
    }
    const hitItem = (hit, withPost) => {
      const c = hit.comment;
      const a = c.author ?? {};
      return h("li", { class: c.parent_id ? "comment reply search-hit" : "comment search-hit", "data-id": c.id },
        h("div", { class: "comment-head" },
          thumb(a.avatar, "", "avatar"),
          h("span", { class: "comment-author", text: authorName(a) }),
          timeEl(c.created_at)),
        h("p", { class: "comment-text" }, c.parent_id && h("span", { class: "muted", text: "↳ reply: " }), markedWords(c.text ?? "", hit.matches)),
        commentImages(c),
        h("div", { class: "comment-meta" },
          h("span", { class: "likes", text: plural(c.likes ?? 0, "like") }),
          c.language && h("span", { class: "muted", text: c.language }),
          h("a", { class: "open-thread", href: hashFor("analyze", { ref: hit.post.ref, comment: c.id }), text: "Open in its thread" })),
        withPost && h("p", { class: "post-line muted" }, `${platformName(hit.post.platform)} · `, postLink(hit.post)));
    };
    if (group.value === "list") {
      hitsBox.replaceChildren(h("ul", { class: "comments", id: "search-list" }, hits.map((hit) => hitItem(hit, true))));
      return;
    }
    const byPost = new Map();
    for (const hit of hits) {
      if (!byPost.has(hit.post.ref)) byPost.set(hit.post.ref, { post: hit.post, hits: [] });
      byPost.get(hit.post.ref).hits.push(hit);
    }
    hitsBox.replaceChildren(...[...byPost.values()].map(({ post, hits: its }) =>
      h("section", { class: "search-group", "data-ref": post.ref },
        h("h3", {}, postLink(post)),
        h("p", { class: "muted", text: `${platformName(post.platform)}${post.author ? ` · @${post.author}` : ""} · ${plural(its.length, "comment")} found here` }),
        h("ul", { class: "comments" }, its.map((hit) => hitItem(hit, false))))));
  };
  const postLink = (post) => h("a", { href: hashFor("analyze", { ref: post.ref }), text: post.title || post.ref });

  const run = async (btn) => {
    let p;
    try {
      p = params();
    } catch (err) {
      showError(v, err);
      return;
    }
    asked = p;
    history.replaceState(null, "", `#/search?${p}`);
    await busy(v, btn, async () => {
      const page = await api("GET", `/comments/search?${p}&limit=${LIMITS.search_page}`);
      hits = page.items;
      cursor = page.next_cursor;
      status.textContent = hits.length
        ? `${plural(hits.length, "comment")}${cursor ? " so far" : ""} found in your library.`
        : "";
      more.hidden = !cursor;
      for (const a of exportBox.querySelectorAll("a")) a.href = `${API}/comments/search/export?${p}&format=${a.dataset.format}`;
      exportBox.hidden = !hits.length;
      draw();
    });
  };
  more.addEventListener("click", () => busy(v, more, async () => {
    const page = await api("GET", `/comments/search?${asked}&limit=${LIMITS.search_page}&cursor=${encodeURIComponent(cursor)}`);
    hits = hits.concat(page.items);
    cursor = page.next_cursor;
    more.hidden = !cursor;
    status.textContent = `${plural(hits.length, "comment")}${cursor ? " so far" : ""} found in your library.`;
    draw();
  }));
  group.addEventListener("change", () => {
    localStorage.setItem("cova.searchGroup", group.value);
    draw();
  });
  exportBox.append(h("span", { class: "label", text: "Download what it finds:" }),
    ...["csv", "jsonl", "xlsx"].map((fmt) => h("a", { id: `search-export-${fmt}`, class: "button small", download: "", "data-format": fmt, text: fmt === "jsonl" ? "JSON Lines" : fmt.toUpperCase() })));

  const f = form("search-form", [
    fieldRow("Words", q, "Every word must be in a comment, in any of its forms (refunds finds refund); \"quotes\" keep a phrase together; emoji and #hashtags count as words."),
    h("div", { class: "toolbar" },
      fieldRow("Platform", platform), fieldRow("From", since), fieldRow("To", until),
      fieldRow("Language", language), fieldRow("Sentiment", sentiment), fieldRow("At least this many likes", minLikes),
      fieldRow("Comments", replies), fieldRow("Images", media), fieldRow("Author", author), fieldRow("Order", sort)),
    h("div", { class: "buttons" }, h("button", { id: "search-submit", type: "submit", class: "primary", text: "Search" })),
  ], run);
  v.add(card(null, f), card("Found", h("div", { class: "toolbar" }, fieldRow("Show", group)), status, exportBox, hitsBox, more));

  // A search in the address (from the header's box, a bookmark or a shared link) runs at once.
  const initial = route.query;
  if (initial.get("q")) {
    q.value = initial.get("q");
    platform.value = initial.get("platform") ?? "";
    // A day as the date field writes it (YYYY-MM-DD), on the reader's clock; `until` is the
    // midnight after the last day.
    const day = (iso, back) => {
      if (!iso) return "";
      const t = new Date(Date.parse(iso));
      t.setDate(t.getDate() - back);
      return `${t.getFullYear()}-${String(t.getMonth() + 1).padStart(2, "0")}-${String(t.getDate()).padStart(2, "0")}`;
    };
    since.value = day(initial.get("since"), 0);
    until.value = day(initial.get("until"), 1);
    language.value = initial.get("language") ?? "";
    sentiment.value = initial.get("sentiment") ?? "";
    minLikes.value = initial.get("min_likes") ?? "";
    replies.value = initial.get("replies") ?? "";
    media.value = initial.get("media") ?? "";
    author.value = initial.get("author") ?? "";
    sort.value = initial.get("sort") ?? "relevance";
    await run(document.getElementById("search-submit"));
  } else {
    q.focus();
  }
}

// ---------------------------------------------------------------- jobs

// Every collection and AI run of the account, newest first, with their results while they
// are kept: a paid result is never lost because its page was closed.
async function viewJobs(v, route) {
  const status = h("select", { id: "jobs-status" }, h("option", { value: "", text: "Any state" }),
    ["queued", "in_progress", "complete", "failed"].map((s) => h("option", { value: s, text: inWords(s) })));
  status.value = route.query.get("status") ?? "";
  const batch = route.query.get("batch");
  const jobs = table("jobs", ["Started", "Post", "State", "Comments", "Result"], "Collections");
  const more = h("button", { id: "jobs-more", type: "button", hidden: true, text: "Load more" });
  const ai = table("ai-jobs", ["Started", "Post", "Tasks", "Charge", "State", "Result"], "AI runs");
  const aiMore = h("button", { id: "ai-jobs-more", type: "button", hidden: true, text: "Load more" });

  const pager = (t, button, path, drawRow, empty) => {
    let cursor = null;
    const load = async (reset) => {
      const params = new URLSearchParams({ limit: "25" });
      if (status.value) params.set("status", status.value);
      if (batch && path === "/analyze") params.set("batch", batch);
      if (!reset && cursor) params.set("cursor", cursor);
      const page = await api("GET", `${path}?${params}`);
      if (reset) t.tbody.replaceChildren();
      for (const item of page.items) t.tbody.append(drawRow(item));
      if (!t.tbody.children.length) t.tbody.append(emptyRow(t.headers, empty));
      cursor = page.next_cursor;
      button.hidden = !cursor;
    };
    button.addEventListener("click", () => busy(v, button, () => load(false)));
    return load;
  };
  const loadJobs = pager(jobs, more, "/analyze", (j) => {
    const links = j.links;
    const result = links
      ? h("div", { class: "buttons" },
        h("a", { class: "button small job-open", href: hashFor("analyze", { job: j.job_id }), text: "Open" }),
        ["csv", "jsonl", "xlsx"].map((fmt) => h("a", { class: `button small job-export-${fmt}`, download: "", href: `${API}/analyze/${encodeURIComponent(j.job_id)}/export?format=${fmt}`, text: fmt === "jsonl" ? "JSON Lines" : fmt.toUpperCase() })))
      : h("span", { class: "muted", text: j.status === "complete" ? "replaced by a later collection" : j.status === "failed" ? plainWords(j.error?.detail ?? "failed") : "not finished" });
    const got = j.progress?.comments_collected ?? 0;
    return row(jobs.headers, [
      timeEl(j.created_at),
      h("div", { class: "job-post" },
        j.post && h("span", { class: "job-title", text: postTitle(j.post, j.ref) }),
        j.post && h("small", { class: "muted job-author", text: ` ${authorName(j.post.author ?? {})}` }),
        j.post && h("br"),
        h("code", { class: "ref", text: j.ref }), j.batch_id && h("small", { class: "muted" }, " · ", h("a", { href: hashFor("jobs", { batch: j.batch_id }), text: "from a list" }))),
      h("span", { class: `state state-${j.status}`, text: inWords(j.status) }),
      j.status === "complete" ? `${fmtNum(got)} (${fmtNum(j.comments_new ?? 0)} new)${j.truncated ? `, stopped at ${inWords(j.truncated_reason ?? "balance")}` : ""}` : fmtNum(got),
      result,
    ], { "data-id": j.job_id });
  }, batch ? "No collection of this list." : "No collection yet.");
  const loadAi = pager(ai, aiMore, "/ai/jobs", (j) => row(ai.headers, [
    timeEl(j.created_at),
    h("a", { href: hashFor("analyze", { ref: j.ref }) }, h("code", { class: "ref", text: j.ref })),
    tasksInWords(j.tasks),
    plural(j.charge ?? 0, "comment"),
    h("span", { class: `state state-${j.status}`, text: aiInWords(j.status) }),
    j.links ? h("a", { class: "button small ai-open", href: hashFor("ai", { ref: j.ref, job: j.id }), text: "Open" }) : "—",
  ], { "data-id": j.id }), "No AI run yet.");

  const filter = form("jobs-filter", [
    h("div", { class: "inline" }, fieldRow("State", status), h("button", { id: "jobs-filter-submit", type: "submit", text: "Show" })),
  ], (btn) => busy(v, btn, () => Promise.all([loadJobs(true), loadAi(true)])));
  v.add(card(null, filter, batch && h("p", { class: "muted" }, "Only the collections of one list. ", h("a", { href: "#/jobs", text: "Show all" }))),
    card("Collections", h("div", { class: "table-wrap" }, jobs.el), more),
    card("AI runs", h("div", { class: "table-wrap" }, ai.el), aiMore));
  await Promise.all([loadJobs(true), loadAi(true)]);
}

// ---------------------------------------------------------------- library

async function viewLibrary(v) {
  const q = h("input", { id: "library-q", type: "search", autocomplete: "off", placeholder: "Title or author" });
  const t = table("library", ["Post", "Status", "Expires", "Comments", "Watch", "Actions"], "Saved analyses");
  const more = h("button", { id: "library-more", type: "button", hidden: true, text: "Load more" });
  let cursor = null;
  let index = 0;

  const load = async (reset) => {
    const params = new URLSearchParams({ limit: "50" });
    if (q.value.trim()) params.set("q", q.value.trim());
    if (!reset && cursor) params.set("cursor", cursor);
    const page = await api("GET", `/analyses/saved?${params}`);
    if (reset) {
      t.tbody.replaceChildren();
      index = 0;
    }
    for (const entry of page.items) t.tbody.append(libraryRow(v, entry, index++, t.headers));
    if (!t.tbody.children.length) t.tbody.append(emptyRow(t.headers, "Nothing here yet. Analyze a post and save it."));
    cursor = page.next_cursor;
    more.hidden = !cursor || page.items.length === 0;
  };
  more.addEventListener("click", () => busy(v, more, () => load(false)));
  const f = form("library-search", [
    h("div", { class: "inline" }, fieldRow("Search the library", q), h("button", { id: "library-search-submit", type: "submit", text: "Search" })),
  ], (btn) => busy(v, btn, () => load(true)));
  v.add(card(null, f, h("div", { class: "table-wrap" }, t.el), more));
  await load(true);
}

function libraryRow(v, entry, i, headers) {
  const note = statusEl(`library-note-${i}`, "span");
  const box = h("input", { id: `watch-${i}`, type: "checkbox", class: "watch-toggle", checked: entry.watch.enabled });
  const interval = h("input", { id: `interval-${i}`, type: "number", class: "watch-interval", min: LIMITS.watch_interval_min[0], max: LIMITS.watch_interval_min[1], step: 1, value: entry.watch.interval_min });
  const watchNote = h("small", { class: "muted", text: describeWatch(entry.watch) });
  const saveWatch = async () => {
    if (!interval.checkValidity()) {
      box.checked = entry.watch.enabled;
      showError(v, { detail: `The watch interval is ${fmtNum(LIMITS.watch_interval_min[0])} to ${fmtNum(LIMITS.watch_interval_min[1])} minutes.` });
      return;
    }
    const w = await busy(v, null, () => api("PUT", `/analyses/${refPath(entry.ref)}/watch`, { enabled: box.checked, interval_min: Number(interval.value) }));
    if (w) entry.watch = w;
    box.checked = entry.watch.enabled; // a refused change (e.g. no pack) puts the box back
    watchNote.textContent = describeWatch(entry.watch);
  };
  box.addEventListener("change", saveWatch);
  interval.addEventListener("change", saveWatch);

  const refresh = h("button", { type: "button", class: "small library-refresh", text: "Refresh" });
  const statusCell = h("span", { class: "entry-status", text: inWords(entry.status) });
  const countCell = h("span", { class: "entry-count", text: fmtNum(entry.comment_count) });
  const expiresCell = h("span", {}, timeEl(entry.expires_at));
  // The row follows its job: state and count as it collects, the entry's figures once done.
  const follow = async (job) => {
    refresh.disabled = true;
    const say = (j) => note.replaceChildren(`${inWords(j.status)}: ${plural(j.progress?.comments_collected ?? 0, "comment")}. `,
      h("a", { href: hashFor("analyze", { job: j.job_id }), text: "Open" }));
    try {
      const done = await poll(`/analyze/${encodeURIComponent(job.job_id)}?limit=1`, (j) => ["complete", "failed"].includes(j.status), say);
      const fresh = await api("GET", `/analyses/${refPath(entry.ref)}?limit=1`);
      statusCell.textContent = inWords(fresh.status);
      countCell.textContent = fmtNum(fresh.counts?.comments ?? fresh.comment_count);
      expiresCell.replaceChildren(timeEl(fresh.expires_at));
      if (done.status === "failed") note.replaceChildren(`The collection failed: ${plainWords(done.error?.detail ?? "")}`);
    } finally {
      refresh.disabled = false;
    }
  };
  refresh.addEventListener("click", () => busy(v, refresh, async () => {
    await follow(await api("POST", `/analyses/${refPath(entry.ref)}/refresh`));
  }));
  const del = h("button", { type: "button", class: "small danger library-delete", text: "Delete" });
  const tr = row(headers, [
    h("div", {},
      h("a", { href: hashFor("analyze", { ref: entry.ref }), text: postTitle(entry.metadata, entry.ref) }),
      h("br"), h("code", { class: "ref", text: entry.ref })),
    statusCell,
    expiresCell,
    countCell,
    h("div", { class: "watch" },
      checkRow("Watch", box),
      h("div", { class: "inline-field" }, h("label", { for: interval.id, text: "every" }), interval, h("span", { text: "min" })),
      watchNote),
    h("div", { class: "buttons" }, refresh, del,
      h("a", { href: hashFor("ai", { ref: entry.ref }), class: "button small", text: "AI" }), note),
  ], { "data-ref": entry.ref });
  del.addEventListener("click", () => {
    if (!confirm(`Remove ${entry.ref} from the library? Its comments are deleted.`)) return;
    busy(v, del, async () => {
      await api("DELETE", `/analyses/${refPath(entry.ref)}`);
      tr.remove();
    });
  });
  return tr;
}

function describeWatch(w) {
  if (w.last_error) return `Last run skipped: ${w.last_error}`;
  if (w.enabled) return `Next run ${fmtDate(w.next_run_at)}`;
  return w.last_run_at ? `Off; last run ${fmtDate(w.last_run_at)}` : "Off";
}

// ---------------------------------------------------------------- creators

const hoursWords = (min) => (min % 60 === 0 ? plural(min / 60, "hour") : plural(min, "minute"));

function describeFollow(w) {
  if (w.last_error) return `The last look found nothing: ${plainWords(w.last_error)}`;
  if (w.enabled) return `Looks for new posts every ${hoursWords(w.interval_min)}; next ${fmtDate(w.next_run_at)}.`;
  return w.last_run_at ? `Not followed; last looked ${fmtDate(w.last_run_at)}.` : "Not followed.";
}

async function viewCreators(v, route) {
  const url = h("input", { id: "creator-url", type: "url", required: true, autocomplete: "off", placeholder: "https://www.tiktok.com/@brand" });
  const added = statusEl("creator-status");
  const t = table("creators", ["Creator", "Audience", "Following", "Actions"], "Followed creators");
  const load = async () => {
    const page = await api("GET", "/creators");
    t.tbody.replaceChildren(...page.items.map((c, i) => creatorRow(v, c, i, t.headers)));
    if (!page.items.length) t.tbody.append(emptyRow(t.headers, "No creator yet. Add an account or a channel above."));
  };
  const f = form("creator-add", [
    fieldRow("Account or channel URL", url, `A TikTok account (https://www.tiktok.com/@name), a YouTube channel (https://www.youtube.com/@name) or an Instagram account (https://www.instagram.com/name/). Adding is free; following looks for new posts on its own, collects them and keeps them in your library.`),
    h("button", { id: "creator-add-submit", type: "submit", text: "Add" }), added,
  ], (btn) => busy(v, btn, async () => {
    added.textContent = "";
    const c = await api("POST", "/creators", { url: url.value.trim() });
    added.textContent = `${creatorName(c)} is in your list. Turn on “Follow” to have new posts collected.`;
    url.value = "";
    await load();
  }));
  v.add(card("Add a creator", f), card("Your creators", h("div", { class: "table-wrap" }, t.el)));
  const open = route.query.get("ref");
  if (open) v.add(await creatorPosts(open), creatorSpikes(v, open));
  await load();
}

// Spike alerts for the posts of one creator, once it is followed.
function creatorSpikes(v, ref) {
  const settings = spikeSettingsForm(v, { prefix: "creator-spike", ref, what: "creator" });
  const box = card("Spike alerts for this creator's posts", settings.el);
  box.id = "creator-spikes";
  settings.load().catch((err) => {
    if (err.status !== 404) return showError(v, err);
    box.replaceChildren(h("h2", { text: "Spike alerts for this creator's posts" }),
      h("p", { class: "muted", text: "Follow this creator to give its posts spike alert settings of their own." }));
  });
  return box;
}

const creatorName = (c) => (c.handle ? `@${c.handle}` : c.name ?? c.ref);

function creatorRow(v, c, i, headers) {
  const box = h("input", { id: `follow-${i}`, type: "checkbox", class: "creator-follow", checked: c.watch.enabled });
  const hours = h("input", { id: `follow-hours-${i}`, type: "number", class: "creator-hours", min: LIMITS.creator_interval_min[0] / 60, max: LIMITS.creator_interval_min[1] / 60, step: 1, value: Math.round(c.watch.interval_min / 60) });
  const note = h("small", { class: "muted creator-note", text: describeFollow(c.watch) });
  const saveFollow = async () => {
    if (!hours.checkValidity()) {
      box.checked = c.watch.enabled;
      showError(v, { detail: `A creator is looked at every ${fmtNum(LIMITS.creator_interval_min[0] / 60)} to ${fmtNum(LIMITS.creator_interval_min[1] / 60)} hours.` });
      return;
    }
    const w = await busy(v, null, () => api("PUT", `/creators/${refPath(c.ref)}/watch`, { enabled: box.checked, interval_min: Number(hours.value) * 60 }));
    if (w) c.watch = w;
    box.checked = c.watch.enabled; // a refused change (e.g. no pack) puts the box back
    note.textContent = describeFollow(c.watch);
  };
  box.addEventListener("change", saveFollow);
  hours.addEventListener("change", saveFollow);

  const said = statusEl(`creator-run-${i}`, "span");
  const look = h("button", { type: "button", class: "small creator-refresh", text: "Look for new posts" });
  look.addEventListener("click", () => busy(v, look, async () => {
    said.textContent = "";
    const run = await api("POST", `/creators/${refPath(c.ref)}/refresh`);
    said.replaceChildren(run.found.length
      ? `Found ${plural(run.found.length, "new post")}${run.batch_id ? "; collecting their comments. " : ". "}`
      : "No new post since the last look. ",
    run.found.length ? h("a", { href: hashFor("creators", { ref: c.ref }), text: "See them" }) : "");
  }));
  const del = h("button", { type: "button", class: "small danger creator-delete", text: "Remove" });
  const tr = row(headers, [
    h("div", { class: "creator" },
      thumb({ url: c.avatar_url }, "", "avatar"),
      h("div", {},
        h("strong", { text: c.name ?? creatorName(c) }), h("br"),
        c.url ? h("a", { href: safeHttpUrl(c.url), rel: "noopener noreferrer", target: "_blank", text: creatorName(c) }) : creatorName(c),
        h("small", { class: "muted", text: ` · ${platformName(c.platform)}` }))),
    `${plural(c.followers ?? 0, "follower")}, ${plural(c.posts ?? 0, "post")}`,
    h("div", { class: "watch" },
      checkRow("Follow", box),
      h("div", { class: "inline-field" }, h("label", { for: hours.id, text: "every" }), hours, h("span", { text: "hours" })),
      note),
    h("div", { class: "buttons" }, look,
      h("a", { class: "button small creator-posts", href: hashFor("creators", { ref: c.ref }), text: "Posts found" }),
      del, said),
  ], { "data-ref": c.ref });
  del.addEventListener("click", () => {
    if (!confirm(`Stop following ${creatorName(c)}? The posts found so far stay in your library.`)) return;
    busy(v, del, async () => {
      await api("DELETE", `/creators/${refPath(c.ref)}`);
      const body = tr.parentElement;
      tr.remove();
      if (body && !body.children.length) body.append(emptyRow(headers, "No creator left. Add an account or a channel above."));
    });
  });
  return tr;
}

async function creatorPosts(ref) {
  const c = await api("GET", `/creators/${refPath(ref)}?limit=50`);
  const t = table("creator-posts", ["Published", "Post", "Collection"], `Posts found of ${creatorName(c)}`);
  const draw = (items) => t.tbody.append(...items.map((p) => row(t.headers, [
    timeEl(p.published_at),
    h("div", {},
      h("a", { class: "creator-post", href: hashFor("analyze", { ref: p.ref }), text: p.title ?? p.ref }),
      p.pinned ? h("small", { class: "muted", text: " · pinned" }) : "",
      h("br"), h("code", { class: "ref", text: p.ref })),
    p.batch_id ? h("a", { href: hashFor("jobs", { batch: p.batch_id }), text: "See the collection" }) : h("span", { class: "muted", text: "not collected (collection is off)" }),
  ], { "data-ref": p.ref })));
  draw(c.found.items);
  if (!c.found.items.length) t.tbody.append(emptyRow(t.headers, "No new post found yet. Posts published after you added the creator appear here."));
  let cursor = c.found.next_cursor;
  const more = h("button", { id: "creator-posts-more", type: "button", hidden: !cursor, text: "Load more" });
  more.addEventListener("click", async () => {
    const page = await api("GET", `/creators/${refPath(ref)}?limit=50&cursor=${encodeURIComponent(cursor)}`);
    draw(page.found.items);
    cursor = page.found.next_cursor;
    more.hidden = !cursor;
  });
  return card(`Posts found of ${creatorName(c)}`, h("div", { class: "table-wrap" }, t.el), more);
}

// ---------------------------------------------------------------- AI

async function viewAi(v, route) {
  // The post is picked by its title among the library's; the one the page was opened for is
  // offered at once, named by its title once the library answers.
  const asked = route.query.get("ref") ?? "";
  const refInput = h("select", { id: "ai-ref" },
    asked ? h("option", { value: asked, text: "The post you opened", selected: true }) : h("option", { value: "", text: "Loading your library…" }));
  const quoteInfo = statusEl("ai-quote-info");
  const consent = h("input", { id: "ai-consent", type: "checkbox", required: true });
  const aiStatus = h("span", { id: "ai-status", class: "job-status", role: "status", "aria-live": "polite" });
  const result = h("div", { id: "ai-result" });
  const following = { gen: 0 };
  let quote = null;

  const quoteForm = form("ai-quote-form", [
    fieldRow("Post", refInput, "A post of your library whose comments are collected."),
    h("div", { class: "buttons" }, h("button", { id: "ai-quote", type: "submit", class: "primary", text: "Get a quote" })),
  ], (btn) => busy(v, btn, async () => {
    if (!refInput.value) throw { detail: "Choose a post of your library first." };
    quote = await api("POST", "/ai/quote", { ref: refInput.value });
    quoteInfo.textContent = `${plural(quote.comments, "comment")} to analyse. Charge: ${plural(quote.charge, "comment")} of your balance. Valid until ${fmtDate(quote.expires_at)}.`;
    consent.checked = false;
    runForm.hidden = false;
  }));
  const runForm = form("ai-run-form", [
    checkRow("I agree that the texts of these comments (never their authors) are sent to the AI analyzer cova is configured with.", consent),
    h("div", { class: "buttons" }, h("button", { id: "ai-run", type: "submit", class: "primary", text: "Run the analysis" })),
  ], (btn) => busy(v, btn, async () => {
    if (!consent.checked) throw { detail: "Tick the consent box to run the analysis." };
    if (!quote) throw { detail: "Get a quote first." };
    const job = await api("POST", "/ai/run", { quote_id: quote.quote_id, consent: true });
    quote = null;
    runForm.hidden = true; // a quote runs once
    quoteInfo.textContent = "Analysis started. Its result appears below once it is ready.";
    history.replaceState(null, "", hashFor("ai", { ref: job.ref, job: job.id }));
    followAiJob(v, job, { statusNode: aiStatus, result, phrases, following });
  }));
  runForm.hidden = true;

  const phrases = Array.from({ length: LIMITS.watch_phrases }, (_, i) => i + 1).map((n) => h("input", { id: `ai-phrase-${n}`, type: "text", maxlength: LIMITS.watch_phrase_chars, autocomplete: "off" }));
  const phrasesStatus = statusEl("ai-queries-status");
  const phrasesForm = form("ai-queries-form", [
    h("p", { class: "hint", text: "Up to three phrases; an AI run lists the comments that contain each. Saving replaces the analysis' phrases." }),
    phrases.map((p, i) => fieldRow(`Phrase ${i + 1}`, p)),
    h("div", { class: "buttons" }, h("button", { id: "ai-queries-save", type: "submit", text: "Save phrases" })),
  ], (btn) => busy(v, btn, async () => {
    const ref = refInput.value;
    if (!ref) throw { detail: "Choose a post of your library first." };
    const queries = phrases.map((p) => p.value.trim()).filter(Boolean);
    const r = await api("PUT", `/ai/${refPath(ref)}/queries`, { queries });
    phrasesStatus.textContent = r.queries.length ? `Saved: ${r.queries.join(", ")}.` : "No watch phrases.";
  }));

  v.add(
    card("Quote and run", quoteForm, quoteInfo, runForm),
    card("Result", h("p", { class: "job-line" }, "Status: ", aiStatus), result),
    card("Watch phrases", phrasesForm, phrasesStatus),
  );

  api("GET", "/analyses/saved?limit=100&status=ready").then((page) => {
    const chosen = refInput.value;
    const options = page.items.map((e) => h("option", { value: e.ref, text: postTitle(e.metadata, e.ref), selected: e.ref === chosen }));
    // The post opened from elsewhere stays offered even when it is not among the first 100.
    if (chosen && !page.items.some((e) => e.ref === chosen)) options.unshift(h("option", { value: chosen, text: "The post you opened", selected: true }));
    if (!options.length) options.push(h("option", { value: "", text: "No post of your library is ready yet: collect and save one first" }));
    else if (!chosen) options.unshift(h("option", { value: "", text: "Choose a post", selected: true }));
    refInput.replaceChildren(...options);
  }).catch(() => {}); // the post opened stays offered

  const jobId = route.query.get("job");
  if (jobId) await followAiJob(v, { id: jobId, status: "" }, { statusNode: aiStatus, result, phrases, following });
}

async function followAiJob(v, first, { statusNode, result, phrases, following }) {
  const live = supersededCheck(following);
  result.replaceChildren();
  statusNode.textContent = first.status ? aiInWords(first.status) : "";
  try {
    const done = (j) => j.status === "complete" || j.status === "failed";
    const job = done(first) ? first
      : await poll(`/ai/jobs/${encodeURIComponent(first.id)}`, done, (j) => {
        live();
        statusNode.textContent = aiInWords(j.status);
      });
    statusNode.textContent = aiInWords(job.status);
    if (job.status === "failed") showError(v, job.error ?? { detail: "The AI job failed; nothing was charged." });
    else renderAiResult(result, job, phrases);
  } catch (err) {
    showError(v, err);
  }
}

function renderAiResult(box, job, phraseInputs) {
  const r = job.result;
  box.replaceChildren(h("p", { class: "muted", text: `${plural(r.comments, "comment")} of this post analysed by ${r.model}, charged ${plural(job.charge, "comment")}.` }));
  if (r.summary) box.append(h("h3", { text: "Summary" }), h("p", { class: "summary", text: r.summary }));
  if (r.sentiment) {
    box.append(barChart("Sentiment", [
      { label: "Positive", value: r.sentiment.positive, cls: "positive" },
      { label: "Neutral", value: r.sentiment.neutral, cls: "neutral" },
      { label: "Negative", value: r.sentiment.negative, cls: "negative" },
    ], { percent: true, id: "chart-sentiment" }));
  }
  if (r.languages && Object.keys(r.languages).length) {
    const names = typeof Intl.DisplayNames === "function" ? new Intl.DisplayNames(undefined, { type: "language" }) : null;
    const langName = (code) => {
      try { return names?.of(code) ?? code; } catch { return code; }
    };
    // "und" is not a language: comments with no words to tell one by (emoji, mentions, links).
    const rows = Object.entries(r.languages).filter(([code]) => code !== "und").sort((a, b) => b[1] - a[1]).slice(0, 10)
      .map(([code, share]) => ({ label: `${langName(code)} (${code})`, value: share }));
    if (rows.length) box.append(barChart("Languages", rows, { percent: true, id: "chart-languages" }));
    if (r.languages.und) {
      box.append(h("p", { class: "muted", id: "languages-none", text: `${fmtPct(r.languages.und)} of the comments are in no language cova can tell: only emoji, mentions or links, or too few words.` }));
    }
  }
  if (r.topics?.length) {
    const topics = [...r.topics].sort((a, b) => b.count - a.count);
    box.append(barChart("Topics", topics.map((t) => ({ label: t.phrase, value: t.count })), { id: "chart-topics" }));
  }
  if (r.questions) {
    box.append(h("h3", { text: "Questions" }), r.questions.length
      ? h("ul", { class: "questions", id: "ai-questions" }, r.questions.map((q) => h("li", {},
        h("strong", { text: q.topic }), ` · ${plural(q.count, "comment")}`, h("br"), h("q", { text: q.example }))))
      : h("p", { class: "muted", text: "No comment asks a question." }));
  }
  if (r.spam_share != null) {
    box.append(h("h3", { text: "Spam" }), h("p", { text: `${fmtPct(r.spam_share)} of the comments look like spam (${plural(r.spam_ids?.length ?? 0, "comment")}).` }));
  }
  if (r.phrase_matches) {
    box.append(h("h3", { text: "Watch phrases" }), r.phrase_matches.length
      ? h("ul", { id: "ai-phrases" }, r.phrase_matches.map((m) => h("li", { class: "phrase-match" }, h("q", { text: m.phrase }), `: ${plural(m.count, "comment")}`,
        h("ul", { class: "phrase-comments" }, m.comment_ids.slice(0, 20).map((id) => h("li", { "data-id": id, class: "muted", text: "…" }))))))
      : h("p", { class: "muted", text: "This analysis has no watch phrases." }));
    // The matching comments' texts, from the analysis' breakdown.
    if (r.phrase_matches.some((m) => m.comment_ids.length)) {
      api("GET", `/analyses/${refPath(job.ref)}`).then((entry) => {
        const text = new Map(entry.comments.flatMap((c) => [c, ...(c.replies ?? [])]).map((c) => [c.id, c]));
        for (const li of box.querySelectorAll(".phrase-comments li")) {
          const c = text.get(li.dataset.id);
          li.replaceChildren(c ? h("span", {}, h("strong", { text: authorName(c.author ?? {}) }), `: ${c.text}`) : "a comment no longer kept");
          li.classList.remove("muted");
        }
      }).catch(() => {});
    }
    // The API has no read of the phrases: the ones in the result are the best prefill.
    r.phrase_matches.forEach((m, i) => { if (phraseInputs[i] && !phraseInputs[i].value) phraseInputs[i].value = m.phrase; });
  }
}

function barChart(title, rows, opts) {
  return CovaChart.bars(title, rows, opts);
}

// ---------------------------------------------------------------- keywords, channels, alerts

async function viewAlerts(v) {
  v.add(keywordsCard(v), matchedCard(v), spikesCard(v), channelsCard(v), alertsCard(v), deliveriesCard(v));
}

const SENSITIVITY_WORDS = {
  sensitive: "Sensitive — more alerts, a few false ones",
  balanced: "Balanced — the usual choice",
  strict: "Strict — only the largest spikes",
};

// A spike alert in words and figures.
function spikeWords(a) {
  const hour = new Date(a.window_end).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  if (a.kind === "sentiment") {
    return `Turned negative: ${fmtPct(a.negative_share)} of the ${plural(a.comments, "comment")} in the hour to ${hour} are negative, against ${fmtPct(a.baseline_negative_share)} usually`;
  }
  if (a.kind === "takeoff") {
    return `Taking off: ${plural(a.comments, "comment")} in its first ${ageWords(Date.parse(a.window_end) - Date.parse(a.window_start))}, against about ${fmtNum(Math.round(a.expected))} for the creator's earlier posts at the same age`;
  }
  return `Drawing comments fast: ${plural(a.comments, "comment")} in the hour to ${hour}, against about ${fmtNum(Math.round(a.expected))} usually`;
}

// Minutes in words, exactly: "90 minutes", "6 hours", "2 hours 30 minutes".
function minutesWords(min) {
  if (min < 120 && min % 60 !== 0) return plural(min, "minute");
  const hours = Math.floor(min / 60);
  return min % 60 ? `${plural(hours, "hour")} ${plural(min % 60, "minute")}` : plural(hours, "hour");
}

// A duration in milliseconds in words: "40 minutes", "3 hours".
function ageWords(ms) {
  const minutes = Math.max(0, Math.floor(ms / 60000));
  return minutes < 120 ? plural(minutes, "minute") : plural(Math.round(minutes / 60), "hour");
}

const SPIKE_BADGES = { volume: "comment spike", sentiment: "turned negative", takeoff: "taking off" };

// What a post's spike checks can judge now: a post too young to judge says until when.
function spikeJudging(j) {
  const at = (iso) => new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  const own = j.volume_from == null
    ? "Spike alerts: no comment in the last two weeks. Its comments per hour are judged against its own rate once it has had about 7 hours of new ones."
    : j.volume === "waiting"
      ? `Spike alerts: too young to judge against its own rate yet. It needs about 7 hours of comments, so its hours are judged from ${at(j.volume_from)}.`
      : "Spike alerts: each collection compares this post's latest hour of comments with its own rate and usual sentiment.";
  const creator = j.takeoff === "waiting"
    ? ` It will also be compared with the creator's earlier posts at the same age once 3 of them have been collected that long (${j.earlier_posts} so far).`
    : j.takeoff === "judged" ? ` It is also compared with ${plural(j.earlier_posts, "earlier post")} of the creator at the same age.` : "";
  return own + creator;
}

// The settings of spike alerts, for the account (`ref` absent) or for one post or followed
// creator of the library. Ids start with `prefix`. A post or creator without settings of its
// own shows what applies to it and says where that comes from; saving gives it its own, and
// "Use the account's settings" removes them.
function spikeSettingsForm(v, { prefix, ref = null, what = "a post" }) {
  const path = ref ? `/spike-alerts/settings/${encodeURIComponent(ref)}` : "/spike-alerts/settings";
  // Whose posts the alerts watch, in the sentences below.
  const subject = !ref ? "a post in your library" : what === "creator" ? "a post of this creator" : "this post";
  const enabled = h("input", { id: `${prefix}-enabled`, type: "checkbox" });
  const sensitivity = h("select", { id: `${prefix}-sensitivity` },
    Object.entries(SENSITIVITY_WORDS).map(([value, text]) => h("option", { value, text })));
  const min = h("input", { id: `${prefix}-min`, type: "number", min: 5, max: 10000, step: 1, inputmode: "numeric" });
  const cooldown = h("input", { id: `${prefix}-cooldown`, type: "number", min: 1, max: 168, step: 1, inputmode: "numeric" });
  const meaning = h("p", { id: `${prefix}-meaning`, class: "muted" });
  const whose = h("p", { id: `${prefix}-whose`, class: "hint", hidden: !ref });
  const status = statusEl(`${prefix}-status`);
  const reset = h("button", { id: `${prefix}-reset`, type: "button", hidden: true, text: "Use the account's settings" });
  const fill = (s) => {
    enabled.checked = s.enabled;
    sensitivity.value = s.sensitivity;
    min.value = s.min_comments ?? "";
    min.placeholder = String(s.judged.min_comments);
    cooldown.value = String(Math.max(1, Math.round(s.cooldown_min / 60)));
    // A cooldown set in minutes through the API is kept as it is unless this field changes.
    cooldown.dataset.shown = cooldown.value;
    cooldown.dataset.minutes = String(s.cooldown_min);
    const j = s.judged;
    meaning.textContent = s.enabled
      ? `After each collection of ${subject}, its last hour of comments is compared with its two weeks before. An alert needs at least ${plural(j.min_comments, "comment")} in the hour and either ${j.ratio} times the post's usual number of comments, or a share of negative comments ${fmtPct(j.negative_share_rise)} above its usual share. A spike that goes on is one alert: the next one on the same post waits ${minutesWords(s.cooldown_min)}.`
      : ref ? `Spike alerts are turned off for this ${what}.` : "Spike alerts are turned off.";
    if (ref) {
      whose.textContent = s.own
        ? `This ${what} has settings of its own: changes to the account's settings do not reach it.`
        : `This ${what} follows the settings that apply to it now (its creator's or the account's). Saving here gives it settings of its own.`;
      reset.hidden = !s.own;
    }
  };
  const f = form(`${prefix}-form`, [
    checkRow(`Tell me when ${subject} suddenly draws comments or turns negative`, enabled),
    fieldRow("Sensitivity", sensitivity),
    fieldRow("At least this many comments in an hour", min, "Leave empty for the sensitivity's own number."),
    fieldRow("Hours before a post can alert again", cooldown),
    h("div", { class: "buttons" }, h("button", { id: `${prefix}-save`, type: "submit", class: "primary", text: "Save" }), reset),
  ], (btn) => busy(v, btn, async () => {
    const minimum = min.value.trim() ? Number(min.value) : null;
    const hours = Number(cooldown.value);
    if (minimum != null && !(Number.isInteger(minimum) && minimum >= 5 && minimum <= 10000)) throw new Error("The number of comments must be a whole number from 5 to 10,000.");
    if (!(Number.isInteger(hours) && hours >= 1 && hours <= 168)) throw new Error("The hours before a post can alert again must be a whole number from 1 to 168.");
    const cooldownMin = cooldown.value === cooldown.dataset.shown ? Number(cooldown.dataset.minutes) : hours * 60;
    fill(await api("PUT", path, { enabled: enabled.checked, sensitivity: sensitivity.value, min_comments: minimum, cooldown_min: cooldownMin }));
    status.textContent = ref ? `Spike alert settings of this ${what} saved.` : "Spike alert settings saved.";
  }));
  reset.addEventListener("click", () => busy(v, reset, async () => {
    fill(await api("DELETE", path));
    status.textContent = `This ${what} follows the account's settings again.`;
  }));
  const load = () => api("GET", path).then(fill);
  return { el: h("div", { class: "spike-settings" }, meaning, whose, f, status), load };
}

// The account's spike alert settings and its alerts.
function spikesCard(v) {
  const settings = spikeSettingsForm(v, { prefix: "spike" });
  const list = h("ul", { id: "spike-alerts", class: "alerts" });
  const empty = h("p", { class: "muted", text: "No spike yet." });
  const refresh = h("button", { id: "spike-alerts-refresh", type: "button", class: "small", text: "Check for new spikes" });
  let since = "";
  const load = async () => {
    for (let page = 0; page < 20; page++) {
      const params = new URLSearchParams({ limit: "500" });
      if (since) params.set("since", since);
      const r = await api("GET", `/spike-alerts?${params}`);
      since = r.next_since;
      for (const a of r.items) list.prepend(spikeItem(a));
      if (r.items.length < 500) break;
    }
    empty.hidden = list.children.length > 0;
  };
  refresh.addEventListener("click", () => busy(v, refresh, load));
  settings.load().catch((err) => showError(v, err));
  load().catch((err) => showError(v, err));
  return card("Spike alerts", settings.el, h("p", { class: "buttons" }, refresh), empty, list);
}

// How an alert names its post: its title in quotes, else its ref.
const alertPost = (a) => (a.title ? `“${a.title}”` : a.ref);

function spikeItem(a) {
  const s = a.sentiment ?? {};
  const post = alertPost(a);
  return h("li", { class: `alert-item spike-item spike-${a.kind}`, "data-ref": a.ref },
    h("div", { class: "comment-head" },
      h("span", { class: "badge", text: SPIKE_BADGES[a.kind] ?? "spike" }),
      h("a", { href: hashFor("analyze", { ref: a.ref }), text: post }),
      a.author ? h("small", { class: "muted", text: ` by @${a.author}` }) : "",
      a.creator ? h("small", { class: "muted", text: ` · ${creatorName(a.creator)}, whom you follow` }) : "",
      timeEl(a.created_at)),
    h("p", { class: "spike-figures", text: `${spikeWords(a)}.` }),
    a.top_terms?.length ? h("p", { class: "muted", text: `What they talk about: ${a.top_terms.join(", ")}.` }) : "",
    h("p", { class: "muted", text: `Sentiment ${a.kind === "takeoff" ? "since it was posted" : "of the hour"}: ${fmtPct(s.positive)} positive, ${fmtPct(s.neutral)} neutral, ${fmtPct(s.negative)} negative.` }),
    (a.examples ?? []).map((c) => h("p", { class: "comment-text" },
      h("strong", { text: c.author?.handle ? `@${c.author.handle}` : (c.author?.name ?? "someone") }), ": ", c.text)));
}

// What the keywords are matched against: the posts in the library and the followed creators'
// posts, or nothing without a pack this month (alerts are a paid feature).
function matchedCard(v) {
  const box = h("div", { id: "alerts-matched", "aria-live": "polite" }, h("p", { class: "muted", text: "Loading…" }));
  const shown = 10;
  Promise.all([api("GET", `/analyses/saved?limit=${shown}`), api("GET", "/creators"), api("GET", "/usage")]).then(([saved, creators, usage]) => {
    const followed = creators.items.filter((c) => c.watch?.enabled);
    const kids = [];
    if (!usage.comments.limit) {
      kids.push(h("p", { class: "notice warning", id: "alerts-no-pack" },
        "Keyword alerts come with a comment pack: no comment is matched this month until you buy one. ",
        h("a", { href: "#/billing", text: "Buy a comment pack" })));
    }
    kids.push(h("p", { text: "A post's comments are matched once when it enters your library (saved from a collection here, collected with an API token, or found for a creator you follow), then after each new collection. Each comment raises one alert per keyword it contains." }));
    if (saved.items.length) {
      kids.push(h("p", { text: saved.next_cursor ? `Posts in your library (the ${shown} newest):` : `${plural(saved.items.length, "post")} in your library:` }),
        h("ul", { class: "matched-posts" }, saved.items.map((e) => h("li", {},
          h("a", { href: hashFor("analyze", { ref: e.ref }), text: postTitle(e.metadata, e.ref) }),
          e.watch?.enabled ? h("small", { class: "muted", text: " · watched" }) : ""))),
        saved.next_cursor ? h("p", {}, h("a", { href: "#/library", text: "See the whole library" })) : "");
    } else {
      kids.push(h("p", { class: "muted", id: "alerts-no-posts" }, "No post in your library yet: save an analysis to have its comments matched. ", h("a", { href: "#/analyze", text: "Analyze a post" })));
    }
    kids.push(h("p", { id: "alerts-creators", text: followed.length
      ? `New posts of ${followed.map(creatorName).join(", ")} are matched as they are found.`
      : "You follow no creator; posts of creators you follow would be matched as they are found." }));
    box.replaceChildren(...kids);
  }).catch((err) => showError(v, err));
  return card("What your keywords are matched against", box);
}

function keywordsCard(v) {
  const kw = h("textarea", { id: "keywords", rows: 6, spellcheck: "false" });
  const status = statusEl("keywords-status");
  const f = form("keywords-form", [
    fieldRow("Keywords, one per line", kw, `Up to ${LIMITS.keywords}, each ${LIMITS.keyword_chars[0]} to ${LIMITS.keyword_chars[1]} characters. A comment of a post in your library that contains one raises an alert. Saving needs a comment pack bought this month.`),
    h("div", { class: "buttons" }, h("button", { id: "keywords-save", type: "submit", class: "primary", text: "Save keywords" })),
  ], (btn) => busy(v, btn, async () => {
    const keywords = kw.value.split("\n").map((s) => s.trim()).filter(Boolean);
    const r = await api("PUT", "/keywords", { keywords });
    kw.value = r.keywords.join("\n");
    status.textContent = `Saved ${plural(r.keywords.length, "keyword")}.`;
  }));
  api("GET", "/keywords").then((r) => { kw.value = r.keywords.join("\n"); }).catch((err) => showError(v, err));
  return card("Keywords", f, status);
}

function channelsCard(v) {
  const chat = h("input", { id: "telegram-chat-id", type: "text", autocomplete: "off", placeholder: "-1001234567890 or @channel" });
  const tgOn = h("input", { id: "telegram-enabled", type: "checkbox", disabled: true });
  const tgReason = h("p", { id: "telegram-disabled", class: "notice", hidden: true });
  const tgNone = h("p", { id: "telegram-unavailable", class: "notice", hidden: true,
    text: "Telegram alerts are not available on this server. Use a webhook instead." });
  const hook = h("input", { id: "webhook-url", type: "text", inputmode: "url", autocomplete: "off", placeholder: "https://hooks.example.com/cova" });
  const hookOn = h("input", { id: "webhook-enabled", type: "checkbox", disabled: true });
  const jobEvents = h("input", { id: "webhook-job-events", type: "checkbox" });
  const hookReason = h("p", { id: "webhook-disabled", class: "notice", hidden: true });
  const status = statusEl("channels-status");
  const secret = h("code", { id: "webhook-secret" });
  const copyStatus = statusEl("webhook-secret-copied", "span");
  const copy = h("button", { id: "webhook-secret-copy", type: "button", class: "small", text: "Copy" });
  const secretBox = h("div", { id: "webhook-secret-box", class: "secret", hidden: true },
    h("p", { text: "The webhook's signing secret. Store it now: it is not shown again." }),
    h("p", { class: "secret-value" }, secret, " ", copy, " ", copyStatus));
  copy.addEventListener("click", () => copyText(secret.textContent, copyStatus));
  const rotate = h("button", { id: "webhook-rotate", type: "button", hidden: true, text: "Rotate secret (the old one stops at once)" });
  const test = h("button", { id: "channels-test", type: "button", text: "Send a test" });
  const testOut = statusEl("channels-test-result");

  const showSecret = (value) => {
    secret.textContent = value;
    copyStatus.textContent = "";
    secretBox.hidden = false;
  };
  // A channel's "Enabled" box means something only once the channel exists: with its field
  // empty the box is off and greyed; typing a chat id or a URL turns it on, as a new channel is.
  const pair = (field, box) => {
    const sync = () => {
      const empty = !field.value.trim();
      if (empty) box.checked = false;
      else if (box.disabled) box.checked = true;
      box.disabled = empty;
    };
    // `change` too: a field emptied without typing (cleared by the browser, a pasted blank)
    // fires no `input`.
    field.addEventListener("input", sync);
    field.addEventListener("change", sync);
    return sync;
  };
  const syncTelegram = pair(chat, tgOn);
  const syncWebhook = pair(hook, hookOn);
  const fill = (ch) => {
    chat.value = ch.telegram?.chat_id ?? "";
    tgOn.checked = ch.telegram?.enabled ?? false;
    tgReason.textContent = ch.telegram?.disabled_reason ? `Turned off by cova: ${ch.telegram.disabled_reason}` : "";
    tgReason.hidden = !ch.telegram?.disabled_reason;
    hook.value = ch.webhook?.url ?? "";
    hookOn.checked = ch.webhook?.enabled ?? false;
    tgOn.disabled = !ch.telegram;
    hookOn.disabled = !ch.webhook;
    if (!ch.telegram) syncTelegram();
    // Without a bot no chat can work: the field is closed (a chat already set can still be
    // removed).
    const noBot = ch.telegram_available === false && !ch.telegram;
    chat.disabled = noBot;
    tgNone.hidden = !noBot;
    if (!ch.webhook) syncWebhook();
    jobEvents.checked = ch.webhook?.job_events ?? false;
    hookReason.textContent = ch.webhook?.disabled_reason ? `Turned off by cova: ${ch.webhook.disabled_reason}` : "";
    hookReason.hidden = !ch.webhook?.disabled_reason;
    rotate.hidden = !ch.webhook;
    if (ch.webhook?.secret) showSecret(ch.webhook.secret);
  };

  const f = form("channels-form", [
    h("fieldset", {}, h("legend", { text: "Telegram" }),
      fieldRow("Chat id", chat, "Leave empty to remove the chat. cova's bot must be able to write to it."),
      checkRow("Enabled", tgOn), tgReason, tgNone),
    h("fieldset", {}, h("legend", { text: "Webhook" }),
      fieldRow("HTTPS URL", hook, "Leave empty to remove the webhook (its secret is deleted)."),
      checkRow("Enabled", hookOn), checkRow("Also tell the webhook when a collection finishes or fails", jobEvents), hookReason),
    h("div", { class: "buttons" }, h("button", { id: "channels-save", type: "submit", class: "primary", text: "Save channels" }), test, rotate),
  ], (btn) => busy(v, btn, async () => {
    const body = {
      telegram: chat.value.trim() ? { chat_id: chat.value.trim(), enabled: tgOn.checked } : null,
      webhook: hook.value.trim() ? { url: hook.value.trim(), enabled: hookOn.checked, job_events: jobEvents.checked } : null,
    };
    fill(await api("PUT", "/notification-channels", body));
    status.textContent = "Channels saved.";
  }));

  rotate.addEventListener("click", () => busy(v, rotate, async () => {
    const r = await api("POST", "/notification-channels/webhook/rotate-secret");
    showSecret(r.secret);
  }));
  test.addEventListener("click", () => busy(v, test, async () => {
    const r = await api("POST", "/notification-channels/test");
    const say = (name, x) => {
      if (!x) return `${name}: not set or turned off, nothing sent`;
      if (x.ok) return `${name}: delivered`;
      const why = x.status != null ? `the receiver answered with an error (${x.status})` : plainWords(x.detail || "no answer");
      return `${name}: not delivered — ${why}`;
    };
    testOut.textContent = `${say("Telegram", r.telegram)}. ${say("Webhook", r.webhook)}.`;
  }));
  api("GET", "/notification-channels").then(fill).catch((err) => showError(v, err));
  return card("Notification channels", f, status, testOut, secretBox);
}

function alertsCard(v) {
  const list = h("ul", { id: "alerts", class: "alerts" });
  const empty = h("p", { class: "muted", text: "No alerts yet." });
  const refresh = h("button", { id: "alerts-refresh", type: "button", class: "small", text: "Check for new alerts" });
  let since = "";
  // Alerts come oldest first after `since`; prepending each shows the newest on top.
  const load = async () => {
    for (let page = 0; page < 20; page++) {
      const params = new URLSearchParams({ limit: "500" });
      if (since) params.set("since", since);
      const r = await api("GET", `/keyword-alerts?${params}`);
      since = r.next_since;
      for (const a of r.items) list.prepend(alertItem(a));
      if (r.items.length < 500) break;
    }
    empty.hidden = list.children.length > 0;
  };
  refresh.addEventListener("click", () => busy(v, refresh, load));
  load().catch((err) => showError(v, err));
  return card("Keyword alerts", h("p", { class: "buttons" }, refresh), empty, list);
}

function alertItem(a) {
  const au = a.comment?.author ?? {};
  return h("li", { class: "alert-item" },
    h("div", { class: "comment-head" },
      h("span", { class: "badge", text: a.keyword }),
      h("a", { href: hashFor("analyze", { ref: a.ref }), text: alertPost(a) }),
      timeEl(a.created_at)),
    h("p", { class: "comment-text" }, h("strong", { text: au.handle ? `@${au.handle}` : (au.name ?? "unknown") }), ": ", a.comment?.text ?? ""));
}

function deliveriesCard(v) {
  const t = table("deliveries", ["Queued", "Event", "Channel", "State", "Attempts", "Last error", ""], "Delivery log");
  const load = async () => {
    const r = await api("GET", "/notification-channels/deliveries?limit=50");
    t.tbody.replaceChildren();
    for (const d of r.items) {
      const replay = h("button", { type: "button", class: "small delivery-replay", text: "Send again" });
      replay.addEventListener("click", () => busy(v, replay, async () => {
        await api("POST", `/notification-channels/deliveries/${encodeURIComponent(d.id)}/replay`);
        await load();
      }));
      t.tbody.append(row(t.headers, [timeEl(d.created_at), EVENT_WORDS[d.type] ?? inWords(d.type), d.channel === "telegram" ? "Telegram" : "webhook", inWords(d.state), fmtNum(d.attempts), d.last_error ? plainWords(d.last_error) : "—", replay]));
    }
    if (!r.items.length) t.tbody.append(emptyRow(t.headers, "Nothing sent yet."));
  };
  load().catch((err) => showError(v, err));
  return card("Deliveries", h("div", { class: "table-wrap" }, t.el));
}

// ---------------------------------------------------------------- tokens

async function viewTokens(v) {
  const name = h("input", { id: "token-name", type: "text", autocomplete: "off", placeholder: "e.g. reporting script" });
  const scopeBoxes = SCOPES.map(([scope, text]) => {
    const box = h("input", { id: `scope-${scope.replace(":", "-")}`, type: "checkbox", name: "scope", value: scope });
    return checkRow(`${scope} — ${text}`, box);
  });
  const value = h("code", { id: "token-value" });
  const copyStatus = statusEl("token-copy-status", "span");
  const copy = h("button", { id: "token-copy", type: "button", class: "small", text: "Copy" });
  copy.addEventListener("click", () => copyText(value.textContent, copyStatus));
  const created = h("div", { id: "token-created", class: "secret", hidden: true },
    h("p", { class: "warning", text: "Copy the token now: it will not be shown again." }),
    h("p", { class: "secret-value" }, value, " ", copy, " ", copyStatus));
  const t = table("tokens-list", ["Name", "Prefix", "Scopes", "Created", "Last used", ""], "Active tokens");

  const load = async () => {
    const r = await api("GET", "/tokens");
    t.tbody.replaceChildren();
    for (const tok of r.tokens) {
      const revoke = h("button", { type: "button", class: "small danger token-revoke", "data-id": tok.id, text: "Revoke" });
      revoke.addEventListener("click", () => {
        if (!confirm(`Revoke the token "${tok.name}"? Scripts that use it stop working within seconds.`)) return;
        busy(v, revoke, async () => {
          await api("DELETE", `/tokens/${encodeURIComponent(tok.id)}`);
          // A revoked token's value is worth nothing: it is not left on the page to be copied.
          if (created.dataset.id === tok.id) {
            created.hidden = true;
            value.textContent = "";
            delete created.dataset.id;
          }
          await load();
        });
      });
      t.tbody.append(row(t.headers, [tok.name, h("code", { text: tok.prefix }), tok.scopes.join(", "),
        timeEl(tok.created_at), tok.last_used_at ? timeEl(tok.last_used_at) : "never", revoke], { "data-id": tok.id }));
    }
    if (!r.tokens.length) t.tbody.append(emptyRow(t.headers, "No active tokens."));
  };

  const f = form("token-form", [
    fieldRow("Name", name, `${LIMITS.token_name_chars[0]} to ${LIMITS.token_name_chars[1]} characters, to tell your tokens apart.`),
    h("fieldset", {}, h("legend", { text: "Scopes" }), scopeBoxes),
    h("div", { class: "buttons" }, h("button", { id: "token-create", type: "submit", class: "primary", text: "Create token" })),
  ], (btn) => busy(v, btn, async () => {
    const scopes = [...v.root.querySelectorAll('input[name="scope"]:checked')].map((b) => b.value);
    const tok = await api("POST", "/tokens", { name: name.value.trim(), scopes });
    value.textContent = tok.token;
    created.dataset.id = tok.id;
    copyStatus.textContent = "";
    created.hidden = false;
    name.value = "";
    await load();
  }));

  v.add(
    h("p", { class: "lead", text: `Tokens call the API from your scripts and servers, with the scopes you pick. Send one as Authorization: Bearer <token>; never put it in a URL. An account has at most ${LIMITS.active_tokens} active tokens.` }),
    card("New token", f, created),
    card("Active tokens", h("div", { class: "table-wrap" }, t.el)),
  );
  await load();
}

// ---------------------------------------------------------------- billing

async function viewBilling(v, route) {
  const balance = h("p", { id: "billing-balance", class: "big-line", text: "…" });
  const packs = h("div", { id: "packs", class: "packs" });
  const t = table("purchases", ["Date", "Comments", "Status", "Paid"], "Purchases");
  const checkoutId = route.query.get("checkout");
  const notice = checkoutId ? h("section", { class: "card notice", id: "checkout-notice" },
    h("p", { id: "checkout-message", text: "Payment received, the pack is being added." }),
    h("p", {}, "Status: ", h("strong", { id: "checkout-status", role: "status", "aria-live": "polite", text: "pending" }))) : null;

  v.add(notice,
    card("Balance", balance, h("p", { class: "hint", text: "Packs count for the calendar month (UTC) they are bought in; nothing carries over." })),
    card("Buy comments", packs),
    card("Purchases", h("div", { class: "table-wrap" }, t.el)));

  const loadBalance = async () => {
    const [u] = await Promise.all([api("GET", "/usage"), loadSession().catch(() => {})]);
    const c = u.comments;
    balance.replaceChildren(h("strong", { text: fmtNum(c.remaining) }),
      ` comments available this month (${fmtNum(c.limit)} granted, ${fmtNum(c.used)} used), until ${fmtDate(c.expires_at)}.`,
      session ? ` Free allowance left: ${fmtNum(session.account.free_comments_left)}.` : "");
  };
  const loadPurchases = async () => {
    const r = await api("GET", "/billing/purchases");
    t.tbody.replaceChildren(...r.purchases.map((p) => row(t.headers,
      [timeEl(p.created_at), `A pack of ${fmtNum(p.comments)}`, inWords(p.status), timeEl(p.paid_at)], { "data-checkout": p.checkout_id, "data-pack": p.pack })));
    if (!r.purchases.length) t.tbody.append(emptyRow(t.headers, "No purchases yet."));
    return r.purchases;
  };
  const loadPacks = async () => {
    const r = await api("GET", "/billing/packs");
    packs.replaceChildren(...r.packs.map((p) => {
      const b = h("button", { type: "button", class: "buy-pack primary", "data-pack": p.id, text: `Buy ${fmtNum(p.comments)} comments — ${fmtMoney(p.price)}` });
      b.addEventListener("click", () => busy(v, b, async () => {
        const r2 = await api("POST", "/billing/checkout", { pack: p.id });
        location.assign(r2.url); // the payment provider's page; it sends the browser back here
      }));
      return b;
    }));
  };

  const results = await Promise.allSettled([loadBalance(), loadPacks(), loadPurchases()]);
  const failed = results.find((r) => r.status === "rejected");
  if (failed) showError(v, failed.reason);
  if (checkoutId) await waitForCheckout(v, checkoutId, loadPurchases, loadBalance);
}

// The provider's webhook grants the pack; it may arrive a little after the browser returns.
async function waitForCheckout(v, id, loadPurchases, loadBalance) {
  const status = document.getElementById("checkout-status");
  const message = document.getElementById("checkout-message");
  const deadline = Date.now() + CHECKOUT_WAIT_MS;
  try {
    for (;;) {
      const purchases = await loadPurchases().catch((err) => {
        if (isAbort(err) || err.status === 401) throw err;
        return [];
      });
      if (purchases.find((p) => p.checkout_id === id)?.status === "paid") {
        status.textContent = "paid";
        message.textContent = "Payment received: the pack is on your balance.";
        document.getElementById("checkout-notice")?.classList.replace("notice", "success");
        await loadBalance();
        return;
      }
      if (Date.now() >= deadline) {
        message.textContent = "Payment received, but the pack is not on the balance yet. It is added as soon as the payment provider confirms; reload this page in a minute.";
        return;
      }
      await sleep(CHECKOUT_POLL_MS);
    }
  } catch (err) {
    showError(v, err);
  }
}

// ---------------------------------------------------------------- start

async function init() {
  document.getElementById("nav-logout").addEventListener("click", logout);
  // The header's search box searches every kept comment (the search page, with its filters).
  document.getElementById("nav-search").addEventListener("submit", (event) => {
    event.preventDefault();
    const box = document.getElementById("nav-search-q");
    const words = box.value.trim();
    if (!words) return box.focus();
    box.value = "";
    go(`#/search?${new URLSearchParams({ q: words })}`);
  });
  // The skip link targets an element, not a route: move focus without touching the hash.
  document.querySelector(".skip-link")?.addEventListener("click", (event) => {
    event.preventDefault();
    document.getElementById("main").focus();
  });
  try {
    await loadSession();
  } catch {
    setSession(null); // cova did not answer: the public pages still work
  }
  window.addEventListener("hashchange", render);
  render();
}

init();
