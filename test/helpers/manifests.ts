/**
 * Renders the Kubernetes overlays as `kubectl apply -k` would (kubectl kustomize, or a
 * standalone kustomize), for the deploy tests. The prod overlay needs its uncommitted secret
 * files: it renders from a copy of deploy/k8s where the example values stand in for them.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { generateCallerKeyPem } from "@cms/platform";
import { ROOT } from "./paths.js";

export const K8S = join(ROOT, "deploy", "k8s");

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: any;
}

/** The kustomize command available here, or undefined. */
export function kustomizeCommand(): string[] | undefined {
  for (const cmd of [["kubectl", "kustomize"], ["kustomize", "build"]]) {
    try {
      execFileSync(cmd[0]!, cmd[0] === "kubectl" ? ["version", "--client"] : ["version"], { stdio: "ignore" });
      return cmd;
    } catch { /* not installed */ }
  }
  return undefined;
}

function render(dir: string): K8sObject[] {
  const cmd = kustomizeCommand();
  if (!cmd) throw new Error("neither kubectl nor kustomize is installed");
  const out = execFileSync(cmd[0]!, [...cmd.slice(1), dir], { encoding: "utf8", maxBuffer: 32 << 20 });
  const objects = parseAllDocuments(out).map((d) => d.toJS()).filter(Boolean) as K8sObject[];
  // kustomize folds long base64 values over lines; the API server's decoder ignores the line
  // breaks, the schema's "byte" format does not: join them as the server would read them.
  for (const o of objects) if (o.kind === "Secret" && o.data) for (const k of Object.keys(o.data)) o.data[k] = String(o.data[k]).replace(/\s+/g, "");
  return objects;
}

/** Every overlay (and the bare base), rendered. */
export function renderOverlays(): Record<"base" | "dev" | "prod", K8sObject[]> {
  const scratch = mkdtempSync(join(tmpdir(), "cms-k8s-"));
  try {
    cpSync(K8S, join(scratch, "k8s"), { recursive: true });
    const prod = join(scratch, "k8s", "overlays", "prod");
    copyFileSync(join(prod, "secrets.env.example"), join(prod, "secrets.env"));
    writeFileSync(join(prod, "caller-signing-key.pem"), generateCallerKeyPem().privateKey);
    return { base: render(join(K8S, "base")), dev: render(join(K8S, "overlays", "dev")), prod: render(prod) };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
