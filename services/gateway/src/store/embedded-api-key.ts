/** The gateway API key of an embedded deployment that configured none, kept under DATA_DIR. */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The key made on first start and read back on every later one (owner-only file). */
export function embeddedApiKey(dataDir: string): string {
  const file = join(dataDir, "gateway-apikey");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  mkdirSync(dataDir, { recursive: true });
  const key = `cms_key_${crypto.randomUUID().replaceAll("-", "")}`;
  writeFileSync(file, key + "\n", { mode: 0o600 });
  return key;
}
