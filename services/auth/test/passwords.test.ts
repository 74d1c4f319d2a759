/** Password hashing: scrypt, parameters carried in the hash, policy. */
import test from "ava";
import { DEFAULT_SCRYPT, hashPassword, needsRehash, parseHash, passwordProblem, verifyPassword } from "../src/domain/passwords.js";

// Cheaper parameters keep the unit tests fast; the format and logic are the same.
const FAST = { ln: 10, r: 8, p: 1 };

test("a hash verifies its password and no other", async (t) => {
  const h = await hashPassword("correct horse battery", FAST);
  t.true(await verifyPassword("correct horse battery", h));
  t.false(await verifyPassword("correct horse batterY", h));
  t.false(await verifyPassword("", h));
});

test("the hash carries its parameters and a fresh salt each time", async (t) => {
  const a = await hashPassword("same password", FAST);
  const b = await hashPassword("same password", FAST);
  t.regex(a, /^\$scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  t.not(a, b);
  t.deepEqual(parseHash(a)?.params, FAST);
});

test("the default parameters are memory-hard and a hash under them verifies", async (t) => {
  t.true(128 * 2 ** DEFAULT_SCRYPT.ln * DEFAULT_SCRYPT.r >= 32 * 1024 * 1024);
  const h = await hashPassword("a real password", DEFAULT_SCRYPT);
  t.true(h.startsWith("$scrypt$ln=15,r=8,p=3$"));
  t.true(await verifyPassword("a real password", h));
  t.false(needsRehash(h));
});

test("a hash made with older parameters still verifies and asks to be re-hashed", async (t) => {
  const old = await hashPassword("older password", FAST);
  t.true(await verifyPassword("older password", old));
  t.true(needsRehash(old));
});

test("composed and decomposed accents are the same password (NFKC)", async (t) => {
  const h = await hashPassword("caf\u00e9-au-lait", FAST);
  t.true(await verifyPassword("cafe\u0301-au-lait", h));
});

test("something that is not one of our hashes never verifies", async (t) => {
  t.false(await verifyPassword("x", "plaintext"));
  t.false(await verifyPassword("x", "$scrypt$ln=40,r=8,p=1$AAAA$AAAA"));
  t.is(parseHash("$argon2id$v=19$m=65536,t=3,p=4$abc$def"), undefined);
});

test("policy: 8 to 256 characters", (t) => {
  t.truthy(passwordProblem("short"));
  t.is(passwordProblem("eight ch"), undefined);
  t.truthy(passwordProblem("x".repeat(257)));
  t.is(passwordProblem("x".repeat(256)), undefined);
});
