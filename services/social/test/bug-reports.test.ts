/** Bug report rules: secret material in any spelling we know, the loose title, the duplicate key. */
import test from "ava";
import { AppError } from "@cms/platform";
import { duplicateKey, findSecret, looseTitle, refuseSecrets, serializedRepro, statusesOf } from "../src/domain/bug-reports.js";

const SECRETS: Array<[string, string]> = [
  ["private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow..."],
  ["openssh private key", "-----BEGIN OPENSSH PRIVATE KEY-----"],
  ["this service's access token", "called with cms_at_AbCdEfGhIjKlMnOpQrStUvWx0123"],
  ["this service's api key", "apikey cms_key_9f8e7d6c5b4a39281706f5e4"],
  ["this service's service credential", "cms_svc_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
  ["webhook secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
  ["jwt", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"],
  ["bearer", "Authorization: Bearer abcdef0123456789abcdef"],
  ["password in a url", "postgres://app:hunter2hunter2@db.internal:5432/app"],
  ["aws access key", "AKIAIOSFODNN7EXAMPLE"],
  ["aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYAB"],
  ["github token", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"],
  ["github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"],
  ["gitlab", "glpat-abcdefghijklmnopqrst"],
  ["slack", "xoxb-123456789012-abcdefghijkl"],
  ["stripe", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"],
  ["anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345"],
  ["openai", "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"],
  ["google", "AIzaSyA-1234567890abcdefghijklmnopqrstu"],
  ["password field", "password=CorrectHorseBattery"],
  ["api key field", "\"api_key\": \"0a1b2c3d4e5f60718293\""],
];

for (const [name, text] of SECRETS) {
  test(`finds ${name}`, (t) => t.truthy(findSecret(text), text));
}

const CLEAN = [
  "collections.search returns 500 for queries with accents",
  "Expected a 404 but got 403 for collection 12345",
  "The token expired too early", "password reset link missing", "see https://example.com/docs?page=2",
  "sk-short", "AKIA is a prefix", "eyJ", "bearer of bad news",
];
for (const text of CLEAN) {
  test(`does not flag ${JSON.stringify(text)}`, (t) => t.is(findSecret(text), undefined));
}

test("refuseSecrets names the field and refuses the whole report", (t) => {
  const err = t.throws(() => refuseSecrets({ title: "fine", notes: "my key is ghp_1234567890abcdefghijklmnopqrstuvwxyzAB" }));
  t.true(err instanceof AppError);
  t.is((err as AppError).code, "secret_material_detected");
  t.is((err as AppError).extra.field, "notes");
  t.notRegex((err as AppError).detail, /ghp_/, "the secret is never echoed");
});

test("the loose title ignores case, whitespace, ids, uuids and numbers", (t) => {
  const a = looseTitle("Collection 12 returns 500   on GET");
  t.is(a, looseTitle("collection 9876 returns 502 on get"));
  t.is(looseTitle("media 3f1c3a52-8f4e-4a8e-9f5e-0c7a1d2b3c4d is missing"), looseTitle("Media 0b6f2d1e-1111-4222-8333-944455556666 is missing!"));
  t.not(looseTitle("collection is missing"), looseTitle("media is missing"));
});

test("the duplicate key: same op, category, error code and loose title", (t) => {
  const base = { relatedOp: "media.list", category: "error", errorCode: "server_error", title: "List of 100 fails" };
  t.is(duplicateKey(base), duplicateKey({ ...base, title: "list of 250  fails", relatedOp: " media.list " }));
  t.not(duplicateKey(base), duplicateKey({ ...base, errorCode: "not_found" }));
  t.not(duplicateKey(base), duplicateKey({ ...base, category: "wrong_result" }));
  t.not(duplicateKey(base), duplicateKey({ ...base, relatedOp: "media.search" }));
});

test("repro is limited serialized, statuses of the list filter", (t) => {
  t.is(serializedRepro({ op: "x" }), '{"op":"x"}');
  t.throws(() => serializedRepro({ big: "x".repeat(5000) }), { message: /at most 4096/ });
  t.deepEqual(statusesOf("open"), ["new", "triaged"]);
  t.deepEqual(statusesOf("rejected"), ["rejected"]);
});
