/** Reserved handles: classes, leet spellings, separators, repeats and the digit affix rule. */
import test from "ava";
import {
  BRAND_NAMES, OPERATIONAL_NAMES, ROUTE_NAMES, leetPattern, leetReadings, normaliseHandle, reservedClassOf, reservedMatch, stripHandle,
} from "../src/domain/reserved-names.js";

test("every listed operational word is reserved as operational", (t) => {
  for (const w of OPERATIONAL_NAMES) t.is(reservedClassOf(w), "operational", w);
});

test("every listed route is reserved as route", (t) => {
  for (const w of ROUTE_NAMES) t.is(reservedClassOf(w), "route", w);
});

test("every listed brand name is reserved as brand", (t) => {
  for (const w of BRAND_NAMES) t.is(reservedClassOf(w), "brand", w);
});

test("the words named by the brief sit in the expected class", (t) => {
  for (const w of ["admin", "administrator", "root", "system", "support", "help", "security", "billing", "staff",
    "moderator", "mod", "official", "api", "status", "abuse", "postmaster", "webmaster", "noreply"]) {
    t.is(reservedClassOf(w), "operational", w);
  }
  for (const w of ["login", "logout", "signup", "settings", "oauth", "auth", "mcp", "assets", "functions", "static",
    "www", "app", "dashboard", "explore", "search"]) {
    t.is(reservedClassOf(w), "route", w);
  }
});

test("leet spellings of operational words are reserved", (t) => {
  for (const h of ["adm1n", "4dmin", "r00t", "supp0rt", "5ystem", "sy5t3m", "h3lp", "53cur1ty", "b1ll1ng", "st4ff",
    "m0d", "ap1", "st4tu5", "4bu53", "n0r3ply", "0ff1c14l", "p0stmaster", "w3bm4st3r", "8illing"]) {
    t.is(reservedClassOf(h), "operational", h);
  }
});

test("1 reads as i or as l", (t) => {
  t.is(reservedClassOf("adm1n"), "operational");
  t.is(reservedClassOf("he1p"), "operational");
  t.is(reservedClassOf("bi11ing"), "operational");
  t.is(reservedClassOf("1nfo"), "operational");
});

test("separators are dropped before comparing", (t) => {
  t.is(reservedClassOf("s_y_s_t_e_m"), "operational");
  t.is(reservedClassOf("sup-port"), "operational");
  t.is(reservedClassOf("a-d_m-i_n"), "operational");
  t.is(reservedClassOf("no-reply"), "operational");
  t.is(reservedClassOf("no_reply"), "operational");
});

test("upper case is compared lowercased", (t) => {
  t.is(reservedClassOf("ADMIN"), "operational");
  t.is(reservedClassOf("Login"), "route");
});

test("extra repeated letters collapse for words of four letters or more", (t) => {
  t.is(reservedClassOf("adddmin"), "operational");
  t.is(reservedClassOf("rooooot"), "operational");
  t.is(reservedClassOf("suppport"), "operational");
  t.is(reservedClassOf("r0o0t"), "operational");
});

test("a repeat never stands for a missing letter", (t) => {
  t.is(reservedClassOf("rot"), undefined);
  t.is(reservedClassOf("suport"), undefined);
  t.is(reservedClassOf("staf"), undefined);
});

test("short words do not take repeats, so ordinary words stay free", (t) => {
  t.is(reservedClassOf("mood"), undefined);
  t.is(reservedClassOf("modd"), undefined);
  t.is(reservedClassOf("apii"), undefined);
});

test("an operational word with digits around it is reserved", (t) => {
  for (const h of ["admin1", "admin_2", "admin-2", "2admin", "root2024", "2024_root", "support247", "adm1n2", "mod2", "api2"]) {
    t.is(reservedClassOf(h), "operational", h);
  }
});

test("an operational word with other letters around it is an ordinary handle", (t) => {
  for (const h of ["root_beer_fan", "rootbeer", "helpful", "statusquo", "administrate", "adminx", "xadmin", "moderate",
    "model", "apiary", "mod_squad", "my_support_group", "systematic", "billings", "staffing"]) {
    t.is(reservedClassOf(h), undefined, h);
  }
});

test("ordinary handles are free", (t) => {
  for (const h of ["alice", "bob", "carol_99", "photos-2024", "x", "a", "travel", "cats_and_dogs", "z9", "ann-marie"]) {
    t.is(reservedClassOf(h), undefined, h);
  }
});

test("routes collide only when spelled exactly", (t) => {
  t.is(reservedClassOf("log1n"), undefined);
  t.is(reservedClassOf("login2"), undefined);
  t.is(reservedClassOf("sign-up"), undefined);
  t.is(reservedClassOf("searching"), undefined);
});

test("brand names are caught in leet spellings, not with digits around them", (t) => {
  t.is(reservedClassOf("cm5"), "brand");
  t.is(reservedClassOf("c_m_s"), "brand");
  t.is(reservedClassOf("cms2"), undefined);
});

test("reservedMatch names the word matched", (t) => {
  t.deepEqual(reservedMatch("4dm1n"), { class: "operational", word: "admin" });
  t.deepEqual(reservedMatch("s_y_s_t_e_m"), { class: "operational", word: "system" });
  t.is(reservedMatch("alice"), undefined);
});

test("the normaliser lowercases, drops separators, maps leet and collapses repeats", (t) => {
  t.is(stripHandle("S_y-S"), "sys");
  t.is(normaliseHandle("R00T"), "rot");
  t.is(normaliseHandle("4dm1n"), "adm1n");
  t.is(normaliseHandle("s_u-p-p0rt"), "suport");
  t.is(normaliseHandle("@$"), "as");
  t.deepEqual(leetReadings("adm1n").sort(), ["admin", "admln"]);
  t.deepEqual(leetReadings("1_1").sort(), ["ii", "il", "li", "ll"]);
});

test("leetPattern keeps run lengths and leet classes", (t) => {
  t.is(leetPattern("mod"), "m{1,1}[o0]{1,1}d{1,1}");
  t.is(leetPattern("root"), "r{1,}[o0]{2,}[t7]{1,}");
});

test("long handles made of ambiguous characters stay fast", (t) => {
  const start = Date.now();
  t.is(reservedClassOf("1".repeat(63)), undefined);
  t.is(reservedClassOf("0".repeat(62) + "x"), undefined);
  t.true(Date.now() - start < 200);
});
