/**
 * `node --import tsx test/with-backends.ts ava [args...]`: the command on real backends, as
 * `test/run-tests.ts --backends` runs it (the name the docs and test files give).
 */
process.argv.splice(2, 0, "--backends");
await import("./run-tests.ts");
