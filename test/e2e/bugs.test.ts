/** bug.report and bug.list through the JSON endpoint. */
import test from "ava";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

let n = 0;
const uniqueOp = () => `media.list${++n}`;

test("a report is received; a repeat of an open one (loose title) counts on it as a duplicate", async (t) => {
  const agent = await sys.user({ scopes: [] });
  const op = uniqueOp();
  const first = await sys.must(agent.token, { op: "bug.report", category: "error", related_op: op, title: "media.list of 100 items fails", error_code: "server_error", severity: "high", repro: { op, limit: 100 } });
  t.is(first.status, "received");
  t.is(first.report_count, 1);
  t.false("duplicate_of" in first);
  const other = await sys.user({ scopes: [] });
  const dup = await sys.must(other.token, { op: "bug.report", category: "error", related_op: op, title: "Media.List of 250   items FAILS", error_code: "server_error" });
  t.deepEqual(dup, { report_id: first.report_id, status: "duplicate", duplicate_of: first.report_id, report_count: 2 });
  const different = await sys.must(agent.token, { op: "bug.report", category: "wrong_result", related_op: op, title: "media.list of 100 items fails", error_code: "server_error" });
  t.is(different.status, "received");
  t.not(different.report_id, first.report_id);
});

test("secret material in any field refuses the whole report, naming the field, and stores nothing", async (t) => {
  const agent = await sys.user({ scopes: [] });
  const op = uniqueOp();
  const cases: Array<[string, Record<string, unknown>]> = [
    ["title", { title: "fails with ghp_1234567890abcdefghijklmnopqrstuvwxyzAB" }],
    ["actual", { title: "t", actual: "Authorization: Bearer abcdefghijklmnop0123456789" }],
    ["repro", { title: "t", repro: { headers: { apikey: "cms_key_AAAAAAAAAAAAAAAAAAAAAAAA" } } }],
    ["notes", { title: "t", notes: "-----BEGIN PRIVATE KEY-----" }],
    ["expected", { title: "t", expected: "https://admin:s3cretpass@internal.example/" }],
  ];
  for (const [field, body] of cases) {
    const res = await sys.call(agent.token, { op: "bug.report", category: "other", related_op: op, ...body });
    t.is(res.status, 400, field);
    t.is(res.body.error, "secret_material_detected");
    t.is(res.body.field, field);
  }
  const admin = await sys.user({ admin: true, scopes: [] });
  const all = await sys.must(admin.token, { op: "bug.list", status: "new", limit: 200 });
  t.false(all.reports.some((r: { related_op: string }) => r.related_op === op), "nothing stored");
});

test("bug.report limits, and idempotency_key replays", async (t) => {
  const agent = await sys.user({ scopes: [] });
  const tooLong = await sys.call(agent.token, { op: "bug.report", category: "other", related_op: "x", title: "t", repro: "x".repeat(5000) });
  t.is(tooLong.status, 400);
  t.is(tooLong.body.field, "repro");
  t.is((await sys.call(agent.token, { op: "bug.report", category: "feature", related_op: "x", title: "t" })).body.field, "category");
  t.is((await sys.call(agent.token, { op: "bug.report", category: "other", related_op: "x", title: "t".repeat(201) })).body.field, "title");
  const op = uniqueOp();
  const body = { op: "bug.report", category: "performance", related_op: op, title: "slow", idempotency_key: `k-${op}` };
  const a = await sys.must(agent.token, body);
  const b = await sys.call(agent.token, body);
  t.deepEqual(b.body, a, "the replay returns the stored answer");
  t.is(b.headers.get("idempotent-replayed"), "true");
});

test("bug.list: administrators only, open = new + triaged, ordered by report_count then recency", async (t) => {
  const agent = await sys.user({ scopes: [] });
  const forbidden = await sys.call(agent.token, { op: "bug.list" });
  t.is(forbidden.status, 403);
  t.is(forbidden.body.error, "forbidden");
  const op = uniqueOp();
  const once = await sys.must(agent.token, { op: "bug.report", category: "error", related_op: op, title: "once" });
  const twice = await sys.must(agent.token, { op: "bug.report", category: "error", related_op: op, title: "twice" });
  await sys.must(agent.token, { op: "bug.report", category: "error", related_op: op, title: "twice" });
  const triaged = await sys.must(agent.token, { op: "bug.report", category: "error", related_op: op, title: "triaged one" });
  const rejected = await sys.must(agent.token, { op: "bug.report", category: "error", related_op: op, title: "rejected one" });
  const db = sys.system.dbOf("social")!;
  await db("bug_reports").where({ id: triaged.report_id }).update({ status: "triaged" });
  await db("bug_reports").where({ id: rejected.report_id }).update({ status: "rejected" });
  const admin = await sys.user({ admin: true, scopes: [] });
  const open = (await sys.must(admin.token, { op: "bug.list", limit: 200 })).reports.filter((r: { related_op: string }) => r.related_op === op);
  t.deepEqual(open.map((r: { report_id: string }) => r.report_id), [twice.report_id, triaged.report_id, once.report_id]);
  t.is(open[0].report_count, 2);
  t.like(open[0], { category: "error", title: "twice", status: "new" });
  const onlyRejected = (await sys.must(admin.token, { op: "bug.list", status: "rejected", limit: 200 })).reports.filter((r: { related_op: string }) => r.related_op === op);
  t.deepEqual(onlyRejected.map((r: { report_id: string }) => r.report_id), [rejected.report_id]);
  t.is((await sys.call(admin.token, { op: "bug.list", limit: 201 })).status, 400);
  const limited = await sys.must(admin.token, { op: "bug.list", limit: 1 });
  t.is(limited.reports.length, 1);
});
