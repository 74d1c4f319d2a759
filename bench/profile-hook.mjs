// Loaded with `--import` into each process of a split system by bench/profile-split.ts: SIGUSR2
// starts a CPU profile (node:inspector, 200 µs sampling), the next SIGUSR2 stops it and writes it
// to $CMS_PROFILE_DIR/<pid>.cpuprofile (written to a temporary name, then renamed, so that a
// reader never sees half a file).
import { Session } from "node:inspector/promises";
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const session = new Session();
session.connect();
let profiling = false;
process.on("SIGUSR2", async () => {
  if (!profiling) {
    profiling = true;
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 200 });
    await session.post("Profiler.start");
    return;
  }
  profiling = false;
  const { profile } = await session.post("Profiler.stop");
  const file = join(process.env.CMS_PROFILE_DIR, `${process.pid}.cpuprofile`);
  writeFileSync(`${file}.part`, JSON.stringify(profile));
  renameSync(`${file}.part`, file);
});
