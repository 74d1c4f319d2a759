/**
 * Split mode end to end: every target in its own process (`--target=<t>`), Connect over HTTP/2
 * between them, PostgreSQL and NATS JetStream shared. Needs real backends (DATABASE_URL and
 * NATS_URL, as test/with-backends.ts sets them); skipped otherwise. Its database starts empty:
 * the five services and two gateways migrate it together, as a first deployment does.
 *
 *   node --import tsx test/with-backends.ts ava test/e2e/split-mode.test.ts
 */
import test from "ava";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { freePorts } from "@cms/platform";
import { EXIT_TIMEOUT_MS, SERVICES, admin, call, splitEnabled, startSplitSystem } from "../helpers/split.js";

const RATE_LIMIT = 6;

if (!splitEnabled) {
  test.skip("split mode end to end (skipped: needs DATABASE_URL and NATS_URL; run with npm run test:backends)", () => {});
} else {
  test("a process whose port was taken before it bound it: the system starts again on fresh ports", async (t) => {
    t.timeout(120_000);
    // Another process takes the all-in-one process's port between the probe and its bind (one
    // process, not six: the retry is the same for every target, and CI's time is short).
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", () => resolve()));
    t.teardown(() => blocker.close());
    const taken = (blocker.address() as { port: number }).port;
    const chosen: number[][] = [];
    const choosePorts = async (count: number) => {
      const ports = await freePorts(count);
      if (chosen.length === 0) ports[SERVICES.length] = taken;
      chosen.push(ports);
      return ports;
    };
    const sys = await startSplitSystem({ allInOne: true, choosePorts });
    t.teardown(() => sys.stop());
    t.is(chosen.length, 2, "started once more, after the process died on EADDRINUSE");
    t.deepEqual(sys.gateways, [`http://127.0.0.1:${chosen[1]![SERVICES.length]!}`]);
    const alice = await sys.user("alice");
    const made = await call(sys.gateways[0]!, alice.token, { op: "collections.create", name: "after the retry" });
    t.is(made.status, 200, JSON.stringify(made.body));
    const listed = await call(sys.gateways[0]!, alice.token, { op: "media.list", collection_id: made.body.collection.id });
    t.is(listed.status, 200, JSON.stringify(listed.body));
  });

  test("split mode: six processes over HTTP/2, shared PostgreSQL rate limit, clean SIGTERM", async (t) => {
    t.timeout(180_000);
    let sys;
    try {
      sys = await startSplitSystem({ gateways: 2, emptyDatabase: true, env: { RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT) } });
    } catch (err) {
      t.fail((err as Error).message);
      return;
    }
    t.teardown(() => sys.stop());
    const { id, cliEnv, procs } = sys;
    const [urlA, urlB] = sys.gateways as [string, string];

    // Users and tokens through the admin CLI, on the same database.
    const [alice, bob, carol, dave] = await Promise.all(["alice", "bob", "carol", "dave"].map((n) => admin(cliEnv, ["user", "create", `${n}_${id}`, "--plan", "paid"])));
    t.is(alice!.username, `alice_${id}`);
    const [aliceTok, readerTok, bobTok, carolTok, daveTok] = await Promise.all([
      admin(cliEnv, ["token", "mint", alice!.username]),
      admin(cliEnv, ["token", "mint", alice!.username, "--scopes", "media:read"]),
      admin(cliEnv, ["token", "mint", bob!.username]),
      admin(cliEnv, ["token", "mint", carol!.username]),
      admin(cliEnv, ["token", "mint", dave!.username]),
    ]);
    const token = aliceTok!.access_token as string;
    t.truthy(token);

    // Calls by alice stay under the limit (each op that passes the scope check counts).
    const ping = await call(urlA, token, { op: "ping" });
    t.is(ping.status, 200, JSON.stringify(ping.body));
    t.is(ping.body.user?.username, alice!.username);

    const ops = await call(urlA, token, { op: "operations.list" });
    t.is(ops.status, 200);
    t.true(ops.body.operations.some((o: { name: string }) => o.name === "bookmarks.list"));

    const denied = await call(urlB, readerTok!.access_token, { op: "collections.get", collection_id: 1 });
    t.is(denied.status, 403);
    t.is(denied.body.error, "insufficient_scope");
    t.is(denied.body.need, "collections:read");

    // bookmarks.list is served by the social service's process, reached over HTTP/2 from gateway B.
    const viaService = await call(urlB, token, { op: "bookmarks.list" });
    t.is(viaService.status, 200, JSON.stringify(viaService.body));
    t.deepEqual(viaService.body.bookmarks, []);

    // Service-to-service calls over HTTP/2 (dave stays under the limit of 6):
    // collections.create; media.text_note.add (media asks collections' CheckAccess);
    // collections.export (collections asks media); collections.publish (collections asks social).
    const daveToken = daveTok!.access_token as string;
    const created = await call(urlA, daveToken, { op: "collections.create", name: "Split" });
    t.is(created.status, 200, JSON.stringify(created.body));
    const cid = created.body.collection.id;
    const noted = await call(urlB, daveToken, { op: "media.text_note.add", collection_id: cid, name: "across processes", text: "hi" });
    t.is(noted.status, 200, JSON.stringify(noted.body));
    const exported = await call(urlA, daveToken, { op: "collections.export", collection_id: cid });
    t.is(exported.status, 200, JSON.stringify(exported.body));
    t.deepEqual(exported.body.media.map((m: { name: string }) => m.name), ["across processes"]);
    // A stored file whose key has a cover's name: adopting it as a media source makes the media
    // service ask the collections service (CoverStoreKeys) whether it is a cover; it is not.
    // (Dave's six calls are the rate limit's budget for a minute.)
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    const uploaded = await call(urlA, daveToken, { op: "media.upload", collection_id: cid, filename: "cover.webp", content_base64: png, content_length: Buffer.from(png, "base64").length });
    t.is(uploaded.status, 200, JSON.stringify(uploaded.body));
    t.regex(uploaded.body.media.main_url, /_cover\.webp$/);
    const adopted = await call(urlB, daveToken, { op: "media.create", collection_id: cid, source_url: uploaded.body.media.main_url });
    t.is(adopted.status, 200, JSON.stringify(adopted.body));
    const published = await call(urlB, daveToken, { op: "collections.publish", collection_id: cid, slug: "split" });
    t.is(published.status, 200, JSON.stringify(published.body));
    t.is(published.body.collection.publish_handle, dave!.username);

    // The rate limit lives in PostgreSQL: calls through both gateways count against one budget.
    // Windows are fixed minutes; start a burst well inside one, and retry once with a fresh
    // user if the window still rolled over during it.
    let checked = false;
    for (const user of [bobTok!.access_token as string, carolTok!.access_token as string]) {
      const left = 60_000 - (Date.now() % 60_000);
      if (left < 15_000) await sleep(left + 250);
      const window = Math.floor(Date.now() / 60_000);
      const statuses: number[] = [];
      for (let i = 0; i < RATE_LIMIT; i++) statuses.push((await call(i % 2 ? urlB : urlA, user, { op: "ping" })).status);
      const overA = await call(urlA, user, { op: "ping" });
      const overB = await call(urlB, user, { op: "ping" });
      if (Math.floor(Date.now() / 60_000) !== window) { t.log("rate-limit window rolled over during the burst; retrying"); continue; }
      t.deepEqual(statuses, Array(RATE_LIMIT).fill(200));
      t.is(overA.status, 429);
      t.is(overA.body.error, "rate_limited");
      t.truthy(overA.headers.get("retry-after"));
      t.is(overB.status, 429);
      checked = true;
      break;
    }
    t.true(checked, "the shared rate limit was checked inside one window");

    // Orderly shutdown: every process exits 0 on SIGTERM.
    for (const p of procs) p.child.kill("SIGTERM");
    const exits = await Promise.all(procs.map((p) => Promise.race([p.exited, sleep(EXIT_TIMEOUT_MS).then(() => "timeout" as const)])));
    exits.forEach((e, i) => {
      const p = procs[i]!;
      if (e === "timeout") t.fail(`${p.name} did not exit within ${EXIT_TIMEOUT_MS} ms of SIGTERM\n${p.output.slice(-20).join("\n")}`);
      else t.is(e.code, 0, `${p.name} exited with code ${e.code} (signal ${e.signal})\n${p.output.slice(-20).join("\n")}`);
    });
  });
}
