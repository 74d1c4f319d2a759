/**
 * A step spanning two services survives the death of the second one. In split mode, the media
 * service is killed (SIGKILL) while it inserts the link row of a sub-collection that
 * collections.create just committed; after media restarts and the recovery job ran, the
 * collections side and the media side agree: the sub-collection and its link row both exist,
 * or neither does. Needs real backends (DATABASE_URL and NATS_URL); skipped otherwise.
 *
 *   node --import tsx test/with-backends.ts ava test/e2e/split-recovery.test.ts
 */
import test from "ava";
import pg from "pg";
import { setTimeout as sleep } from "node:timers/promises";
import { admin, call, splitEnabled, startSplitSystem } from "../helpers/split.js";
import { heldInMedia } from "../helpers/faults.js";

if (!splitEnabled) {
  test.skip("split mode recovery (skipped: needs DATABASE_URL and NATS_URL; run with npm run test:backends)", () => {});
} else {
  test("collections.create with a parent: media killed mid-step, restarted, recovery job run; both sides agree", async (t) => {
    t.timeout(240_000);
    let sys;
    try {
      sys = await startSplitSystem();
    } catch (err) {
      t.fail((err as Error).message);
      return;
    }
    t.teardown(() => sys.stop());
    const db = new pg.Client({ connectionString: sys.env.DATABASE_URL });
    await db.connect();
    t.teardown(() => db.end());
    const [gw] = sys.gateways as [string];
    const alice = await sys.user("alice");
    const op = async (body: Record<string, unknown>) => {
      const res = await call(gw, alice.token, body);
      t.is(res.status, 200, `${body.op}: ${JSON.stringify(res.body)}\n${sys.diagnostics()}`);
      return res.body;
    };

    const parent = (await op({ op: "collections.create", name: "Parent" })).collection.id as number;

    // Stall media deterministically: hold the lock its transaction takes on the parent, so that
    // the link row's insert waits inside media's open transaction.
    const creating = await heldInMedia(db, sys, parent, () => call(gw, alice.token, { op: "collections.create", name: "Child", parent_collection_id: parent }));
    const { rows: recorded } = await db.query("SELECT kind, state FROM collections.pending_steps");
    t.deepEqual(recorded, [{ kind: "create_link", state: "pending" }], "the collection committed with its pending step");

    const media = sys.procs.find((p) => p.name === "media" && !p.done)!;
    media.child.kill("SIGKILL");
    await media.exited;
    // The dead process's transaction never commits: once it gets the lock, its backend finds
    // the client gone and rolls back.
    await creating.release();

    const answer = await creating.answer;
    t.is(answer.status, 503, JSON.stringify(answer.body));
    t.is(answer.body.error, "unavailable");
    // The collections side was undone at once; the media side could not follow (media is down).
    const { rows: undoing } = await db.query("SELECT kind, state, attempts FROM collections.pending_steps");
    t.deepEqual(undoing, [{ kind: "create_link", state: "compensating", attempts: 1 }]);
    t.is((await db.query("SELECT count(*)::int AS n FROM collections.collections WHERE name = 'Child'")).rows[0].n, 0);

    await sys.restart("media");
    // Run the recovery job as an operator would, as if its retry delays had passed; another
    // replica (the collections process's own timer) may hold the job's lock for a moment.
    const runAt = new Date(Date.now() + 3600_000).toISOString();
    let report: Record<string, any> = {};
    for (let i = 0; i < 10; i++) {
      report = await admin(sys.cliEnv, ["jobs", "run", "pending_steps", "--now", runAt]);
      if (!report.skipped) break;
      await sleep(500);
    }
    t.falsy(report.skipped, JSON.stringify(report));
    t.log("recovery job:", report);
    const { rows: left } = await db.query("SELECT kind, state, attempts, last_error FROM collections.pending_steps");
    t.deepEqual(left, [], "no step left");

    // Both sides agree: the child and its link row in the parent both exist, or neither does.
    const children = (await op({ op: "collections.list", parent_collection_id: parent })).collections as Array<{ id: number; name: string }>;
    const links = ((await op({ op: "media.list", collection_id: parent })).media as Array<{ linked_collection_id?: number }>)
      .filter((m) => m.linked_collection_id !== undefined && m.linked_collection_id !== null);
    const mine = (await op({ op: "collections.list", include_subcollections: true })).collections as Array<{ name: string }>;
    t.is(children.length, links.length, `children ${JSON.stringify(children)}, link rows ${JSON.stringify(links)}`);
    t.deepEqual(links.map((l) => l.linked_collection_id), children.map((c) => c.id));
    t.is(mine.filter((c) => c.name === "Child").length, children.length);
    // The client got 503 for the create, so here it is "neither".
    t.deepEqual(children, []);

    // With media back, the same create goes through, with its link row.
    const created = await op({ op: "collections.create", name: "Child", parent_collection_id: parent });
    const after = ((await op({ op: "media.list", collection_id: parent })).media as Array<{ id: number; linked_collection_id?: number }>)
      .filter((m) => m.linked_collection_id === created.collection.id);
    t.deepEqual(after.map((m) => m.id), [created.link_media_id]);
  });
}
