// What a TypeScript integrator writes against the types openapi-typescript generates from
// docs/openapi.json (`schema.d.ts`, generated beside this file by .ci/clients). It is only
// compiled (`tsc --strict --noEmit`): a type the document gets wrong, or an event or state it
// leaves out, is a compile error here.
import type { components, paths } from "./schema";

type Schemas = components["schemas"];
// The answer of GET /analyze/{job_id} as the operation declares it.
type JobAnswer = paths["/api/v1/analyze/{job_id}"]["get"]["responses"][200]["content"]["application/json"];
type JobWithResult = Schemas["JobWithResult"];
type Delivery = Schemas["Delivery"];
type Batch = Schemas["Batch"];
type BatchWebhook = Schemas["BatchWebhook"];

export interface Row {
  id: string;
  parent: string | null;
  text: string;
  author: string | null;
  likes: number;
}

// Every comment of a complete job, each top-level comment followed by its replies.
export function rows(job: JobAnswer): Row[] {
  if (job.status !== "complete" || job.result === undefined) {
    return [];
  }
  const out: Row[] = [];
  for (const c of job.result.comments) {
    out.push({ id: c.id, parent: null, text: c.text, author: c.author.handle, likes: c.likes });
    for (const r of c.replies) {
      out.push({ id: r.id, parent: r.parent_id, text: r.text, author: r.author.handle, likes: r.likes });
      // Replies are one level deep: a reply's own list is always empty.
      const nested: number = r.replies.length;
      if (nested !== 0) {
        throw new Error(`reply ${r.id} has replies`);
      }
    }
  }
  return out;
}

// Polling: when to stop, and why a job failed.
export function finished(job: JobWithResult): { done: boolean; error: string | null } {
  switch (job.status) {
    case "queued":
    case "in_progress":
      return { done: false, error: null };
    case "complete":
      return { done: true, error: null };
    case "failed":
      return { done: true, error: job.error ? `${job.error.code}: ${job.error.detail}` : "failed" };
    default: {
      const unknown: never = job.status;
      return unknown;
    }
  }
}

// The delivery log, one line per entry; every event type the document names is handled.
export function describe(d: Delivery): string {
  let what: string;
  switch (d.type) {
    case "keyword.alert":
      what = "a keyword alert";
      break;
    case "spike.alert":
      what = "a spike alert";
      break;
    case "job.complete":
    case "job.failed":
      what = "the end of a job";
      break;
    case "batch.complete":
      what = "the end of a batch";
      break;
    case "creator.post_found":
      what = "a followed creator's new post";
      break;
    default: {
      const unknown: never = d.type;
      return unknown;
    }
  }
  const due = d.state === "pending" && d.next_attempt_at !== null ? `, next attempt ${d.next_attempt_at}` : "";
  const last = d.last_status === null ? "" : `, last HTTP ${d.last_status}`;
  return `${d.channel}: ${what} (${d.event_id}) ${d.state} after ${d.attempts} attempts${last}${due}`;
}

// A batch is over when every URL has ended; its webhook carries the same counts.
export function ended(b: Batch): boolean {
  const c = b.counts;
  return c.waiting === 0 && c.running === 0 && c.complete + c.failed + c.refused + c.cancelled === b.items.length;
}

export function jobsOf(b: Batch): string[] {
  return b.items.flatMap((item) => (item.job === null ? [] : [item.job.job_id]));
}

export function sameCounts(b: Batch, hook: BatchWebhook): boolean {
  return (
    hook.batch_id === b.batch_id &&
    hook.total === b.items.length &&
    hook.complete === b.counts.complete &&
    hook.failed === b.counts.failed &&
    hook.refused === b.counts.refused &&
    hook.cancelled === b.counts.cancelled
  );
}

// The delivery of docs/API.md's example, as a literal of the generated type.
export const example: Delivery = {
  id: "0193a4c2-6a10-7b22-8c3d-4e5f60718293",
  event_id: "0193a4c2-5d1e-7f3a-9b0c-2e4f6a8b0c1d",
  type: "keyword.alert",
  channel: "webhook",
  state: "pending",
  attempts: 2,
  last_status: 503,
  last_error: "HTTP 503: busy",
  next_attempt_at: "2026-11-22T03:10:23Z",
  delivered_at: null,
  created_at: "2026-11-22T03:08:52Z",
};
