/**
 * The admin CLI (conventions.md "Administration"): `npm run -s admin -- <command>`. It reaches
 * the same database as the system started with the same env: DATABASE_URL, or the embedded
 * engine under DATA_DIR (attached while `npm start` runs, started briefly otherwise). Prints one
 * JSON object on stdout; logs go to stderr.
 */
import { parseArgs } from "node:util";
import { createDb, createLogger, createUnitOfWork, generateCallerKeyPem, loadConfig, migrate, serviceMigrations, AppError, type Knex } from "@cms/platform";
import { startEmbeddedPostgres } from "@cms/platform/embedded-postgres";
import { createAuth, createAuthStore, authMigrations, createOAuth, createOAuthStore } from "@cms/auth";
import { OAuthError } from "@cms/auth/domain/oauth";
import { launch } from "@cms/platform/launcher";
import { MODULES } from "./system.js";

const USAGE = `usage: npm run -s admin -- <command>
  user create <username> [--plan free|paid|founding] [--admin] [--password-stdin]
  user password <username>            (the new password on standard input)
  token mint <username> [--scopes "collections:read media:write ..."]
  client create --name <text> --redirect-uri <uri> [--redirect-uri <uri> ...] [--confidential]
  apikey create [--label <text>]
  service create <name>
  keys generate
  jobs run retention|pending_steps [--now <ISO 8601>]`;

function fail(message: string, code = 2): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      plan: { type: "string", default: "free" },
      admin: { type: "boolean", default: false },
      "password-stdin": { type: "boolean", default: false },
      name: { type: "string" },
      "redirect-uri": { type: "string", multiple: true },
      confidential: { type: "boolean", default: false },
      scopes: { type: "string" },
      label: { type: "string", default: "admin-cli" },
      now: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help || positionals.length < 2) fail(USAGE);
  const [noun, verb, ...rest] = positionals;
  if (`${noun} ${verb}` === "keys generate") {
    // Needs no database: a fresh key pair for CALLER_SIGNING_KEY (private) and, during a
    // rotation, CALLER_VERIFY_KEYS (the previous public key).
    const pair = generateCallerKeyPem();
    process.stdout.write(JSON.stringify({ private_key: pair.privateKey, public_key: pair.publicKey }) + "\n");
    return;
  }
  const config = loadConfig({ ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" }, []);
  const log = createLogger(config.logLevel, { cli: true }, true);
  // Logs must not mix with the JSON on stdout.
  const stderrLog = log.child({}, { level: config.logLevel });
  let databaseUrl = config.databaseUrl;
  let stopDb = async () => {};
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres(config.dataDir, stderrLog, { attach: true });
    databaseUrl = pg.url;
    stopDb = () => pg.stop();
  }
  databaseUrlForJobs = databaseUrl;
  const dbs: Knex[] = [];
  const dbFor = (schema: string) => {
    const db = createDb(databaseUrl!, schema, 2);
    dbs.push(db);
    return db;
  };
  try {
    const out = await run(noun!, verb!, rest, values, dbFor);
    process.stdout.write(JSON.stringify(out) + "\n");
  } catch (err) {
    if (err instanceof AppError) fail(JSON.stringify(err.toBody()), 1);
    throw err;
  } finally {
    for (const db of dbs) await db.destroy();
    await stopDb();
  }
}

let databaseUrlForJobs = "";

/**
 * A password from standard input (never from the command line, where other users and the shell
 * history see it): everything up to the end, without one trailing newline.
 */
async function passwordFromStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write("password (then Enter and Ctrl-D): ");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const password = Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "");
  if (!password) fail("no password on standard input");
  return password;
}

/** Jobs need the modules (and their neighbours): run them in this process, without the gateway. */
async function runJob(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const config = loadConfig({ ...process.env, DATABASE_URL: databaseUrlForJobs, LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" }, ["--target=all"]);
  const system = await launch(config, { ...MODULES, headless: true, log: createLogger(config.logLevel, { cli: true }, true) });
  try {
    const out = await system.runJob(name, args);
    await system.publishPendingEvents();
    return out;
  } finally {
    await system.stop();
  }
}

async function run(noun: string, verb: string, rest: string[], values: Record<string, unknown>, dbFor: (schema: string) => Knex): Promise<Record<string, unknown>> {
  /** The auth schema's pool, migrated. */
  const authPool = async () => {
    const db = dbFor("auth");
    await migrate(db, "auth", serviceMigrations(authMigrations));
    return db;
  };
  const authDb = async () => createAuth(createAuthStore(await authPool()));
  switch (`${noun} ${verb}`) {
    case "user create": {
      const username = rest[0] ?? fail(USAGE);
      const password = values["password-stdin"] ? await passwordFromStdin() : undefined;
      const auth = await authDb();
      const user = await auth.createUser(username, String(values.plan), Boolean(values.admin), password);
      return { user_id: user.id, username: user.username, plan: user.plan, is_admin: user.is_admin };
    }
    case "user password": {
      const username = rest[0] ?? fail(USAGE);
      const password = await passwordFromStdin();
      const auth = await authDb();
      await auth.setPassword(username, password);
      return { username, password_set: true };
    }
    case "token mint": {
      const username = rest[0] ?? fail(USAGE);
      const auth = await authDb();
      const t = await auth.mintToken(username, values.scopes === undefined ? undefined : String(values.scopes), { clientId: "admin-cli" });
      return { access_token: t.accessToken, scopes: t.scopes, expires_at: t.expiresAt.toISOString() };
    }
    case "client create": {
      if (values.name === undefined || !(values["redirect-uri"] as string[] | undefined)?.length) fail(USAGE);
      const db = await authPool();
      const oauth = createOAuth({
        store: createOAuthStore(db), uow: createUnitOfWork(db, createOAuthStore, { notify() {} }),
        // Resources matter to authorizations, not to registering a client.
        resources: () => ({ mcp: "", api: "" }),
      });
      try {
        const { client, secret } = await oauth.registerClient({
          name: String(values.name), redirectUris: values["redirect-uri"] as string[], confidential: Boolean(values.confidential), registeredBy: "cli",
        });
        return secret ? { client_id: client.client_id, client_secret: secret } : { client_id: client.client_id };
      } catch (err) {
        if (err instanceof OAuthError) fail(JSON.stringify({ error: err.code, error_description: err.description }), 1);
        throw err;
      }
    }
    case "apikey create": {
      const auth = await authDb();
      return { apikey: await auth.createApiKey(String(values.label)) };
    }
    case "service create": {
      const name = rest[0] ?? fail(USAGE);
      const auth = await authDb();
      return auth.createServiceCredential(name);
    }
    case "jobs run": {
      const name = rest[0] ?? fail(USAGE);
      if (values.now !== undefined && Number.isNaN(Date.parse(String(values.now)))) fail(`--now must be an ISO 8601 time, got "${values.now}"`);
      return runJob(name, { now: values.now });
    }
    default:
      return fail(`unknown command "${noun} ${verb}"\n${USAGE}`);
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
