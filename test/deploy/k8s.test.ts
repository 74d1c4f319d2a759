/**
 * The Kubernetes manifests as a cluster would get them: every overlay rendered with kustomize,
 * every object validated against the Kubernetes schemas (kubernetes-models), and the references
 * between objects checked: envFrom ConfigMaps and Secrets exist (with the keys the processes
 * need), Service selectors match pod labels and their target ports exist, probe ports exist,
 * ServiceAccounts, PodDisruptionBudgets and HorizontalPodAutoscalers point at real workloads, and
 * each target's pod keeps the production rules (no tsx, probes, limits, read-only root, graceful
 * shutdown). The checker is also run on broken copies, to show it catches what it claims to.
 */
import test from "ava";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { ConfigMap, Namespace, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { K8S, kustomizeCommand, renderOverlays, type K8sObject } from "../helpers/manifests.js";

const TARGETS = ["gateway", "auth", "collections", "media", "social", "webhooks"];
const REQUIRED_SECRETS = ["DATABASE_URL", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "GATEWAY_API_KEYS", "GRANT_SECRET", "CALLER_SIGNING_KEY"];

type Model = { new (data: any): { validate(): void } };
const MODELS: Record<string, Model> = {
  "v1/ConfigMap": ConfigMap, "v1/Secret": Secret, "v1/Service": Service, "v1/ServiceAccount": ServiceAccount, "v1/Namespace": Namespace,
  "apps/v1/Deployment": Deployment, "apps/v1/StatefulSet": StatefulSet,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
};

/** Problems of one object against the Kubernetes schema (unknown kinds are problems too). */
export function schemaProblems(o: K8sObject): string[] {
  const Model = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!Model) return [`${o.kind} ${o.metadata?.name}: no schema known for ${o.apiVersion}/${o.kind}`];
  try {
    new Model(o).validate();
    return [];
  } catch (err) {
    return [`${o.kind} ${o.metadata.name}: ${(err as Error).message}`];
  }
}

const matches = (selector: Record<string, string> = {}, labels: Record<string, string> = {}) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

const decode = (s: K8sObject, key: string) => (s.data?.[key] !== undefined ? Buffer.from(s.data[key], "base64").toString("utf8") : s.stringData?.[key]);

/** Problems of the references between the objects of one rendering, and of the targets' pod rules. */
export function referenceProblems(objects: K8sObject[], opts: { replicas?: "one" | "many"; backendsInCluster?: boolean; secretFromOverlay?: boolean } = {}): string[] {
  const problems: string[] = [];
  const find = (kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const workloads = objects.filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet");
  const podLabels = (w: K8sObject) => w.spec.template.metadata?.labels ?? {};
  const containersOf = (w: K8sObject) => [...(w.spec.template.spec.initContainers ?? []), ...w.spec.template.spec.containers] as any[];
  const portsOf = (w: K8sObject) => containersOf(w).flatMap((c) => c.ports ?? []) as Array<{ name?: string; containerPort: number }>;
  const hasPort = (w: K8sObject, port: string | number) => portsOf(w).some((p) => (typeof port === "number" ? p.containerPort === port : p.name === port));

  for (const w of workloads) {
    const id = `${w.kind} ${w.metadata.name}`;
    if (!matches(w.spec.selector?.matchLabels, podLabels(w))) problems.push(`${id}: its selector does not match its pod labels`);
    const pod = w.spec.template.spec;
    if (pod.serviceAccountName && !find("ServiceAccount", pod.serviceAccountName)) problems.push(`${id}: ServiceAccount ${pod.serviceAccountName} does not exist`);
    for (const v of pod.volumes ?? []) {
      if (v.configMap && !find("ConfigMap", v.configMap.name)) problems.push(`${id}: volume ConfigMap ${v.configMap.name} does not exist`);
      if (v.secret && !find("Secret", v.secret.secretName)) problems.push(`${id}: volume Secret ${v.secret.secretName} does not exist`);
    }
    for (const c of containersOf(w)) {
      for (const ref of c.envFrom ?? []) {
        if (ref.configMapRef && !find("ConfigMap", ref.configMapRef.name)) problems.push(`${id}: envFrom ConfigMap ${ref.configMapRef.name} does not exist`);
        if (ref.secretRef && !opts.secretFromOverlay && !find("Secret", ref.secretRef.name)) problems.push(`${id}: envFrom Secret ${ref.secretRef.name} does not exist`);
      }
      for (const e of c.env ?? []) {
        const s = e.valueFrom?.secretKeyRef;
        if (s && decode(find("Secret", s.name) ?? ({} as K8sObject), s.key) === undefined) problems.push(`${id}: env ${e.name} reads ${s.name}/${s.key}, which does not exist`);
      }
      const volumes = [...(pod.volumes ?? []), ...(w.spec.volumeClaimTemplates ?? []).map((v: K8sObject) => ({ name: v.metadata.name }))];
      for (const m of c.volumeMounts ?? []) if (!volumes.some((v: { name: string }) => v.name === m.name)) problems.push(`${id}: mount of unknown volume ${m.name}`);
      for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const p = c[kind];
        const port = p?.grpc?.port ?? p?.httpGet?.port ?? p?.tcpSocket?.port;
        if (port !== undefined && !hasPort(w, port)) problems.push(`${id}: ${kind} port ${port} is not a port of the container`);
      }
    }
  }
  for (const svc of objects.filter((o) => o.kind === "Service")) {
    const backing = workloads.filter((w) => matches(svc.spec.selector, podLabels(w)));
    if (!backing.length) { problems.push(`Service ${svc.metadata.name}: its selector matches no pod`); continue; }
    for (const p of svc.spec.ports) {
      const target = p.targetPort ?? p.port;
      if (!backing.every((w) => hasPort(w, target))) problems.push(`Service ${svc.metadata.name}: target port ${target} is not a port of its pods`);
    }
  }
  for (const pdb of objects.filter((o) => o.kind === "PodDisruptionBudget")) {
    if (!workloads.some((w) => matches(pdb.spec.selector?.matchLabels, podLabels(w)))) problems.push(`PodDisruptionBudget ${pdb.metadata.name}: its selector matches no pod`);
  }
  for (const hpa of objects.filter((o) => o.kind === "HorizontalPodAutoscaler")) {
    const ref = hpa.spec.scaleTargetRef;
    if (!find(ref.kind, ref.name)) problems.push(`HorizontalPodAutoscaler ${hpa.metadata.name}: ${ref.kind} ${ref.name} does not exist`);
  }

  // The system's own targets.
  const config = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("cms-config"));
  const secret = objects.find((o) => o.kind === "Secret" && o.metadata.name.startsWith("cms-secrets"));
  const shutdownMs = Number(config?.data?.SHUTDOWN_TIMEOUT_MS ?? 30000);
  for (const target of TARGETS) {
    const d = find("Deployment", target);
    if (!d) { problems.push(`no Deployment for target ${target}`); continue; }
    const pod = d.spec.template.spec;
    const c = pod.containers[0];
    const cmd = [...(c.command ?? []), ...(c.args ?? [])].join(" ");
    if (/\btsx\b|\.ts\b/.test(cmd)) problems.push(`${target}: runs TypeScript (${cmd})`);
    if (!(c.args ?? []).includes(`--target=${target}`)) problems.push(`${target}: does not pass --target=${target}`);
    if (!c.startupProbe || !c.readinessProbe || !c.livenessProbe) problems.push(`${target}: needs startup, readiness and liveness probes`);
    if (target === "gateway") {
      if (c.readinessProbe?.httpGet?.path !== "/readyz" || c.livenessProbe?.httpGet?.path !== "/healthz") problems.push("gateway: probes must be HTTP /readyz (readiness) and /healthz (liveness)");
    } else if (!c.readinessProbe?.grpc || !c.livenessProbe?.grpc || !c.startupProbe?.grpc) {
      problems.push(`${target}: probes must be native gRPC (grpc.health.v1)`);
    }
    if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory || !c.resources?.limits?.memory) problems.push(`${target}: needs cpu/memory requests and a memory limit`);
    if (!pod.securityContext?.runAsNonRoot) problems.push(`${target}: pod must run as non-root`);
    const sc = c.securityContext ?? {};
    if (!sc.readOnlyRootFilesystem || sc.allowPrivilegeEscalation !== false || !(sc.capabilities?.drop ?? []).includes("ALL")) problems.push(`${target}: needs a read-only root, no privilege escalation, capabilities dropped`);
    if (pod.automountServiceAccountToken !== false || find("ServiceAccount", pod.serviceAccountName ?? "")?.automountServiceAccountToken !== false) problems.push(`${target}: its ServiceAccount token must not be mounted`);
    if (pod.serviceAccountName !== target) problems.push(`${target}: runs as ServiceAccount ${pod.serviceAccountName}, not its own`);
    if (!c.lifecycle?.preStop) problems.push(`${target}: needs a preStop hook`);
    if (!(pod.terminationGracePeriodSeconds * 1000 >= shutdownMs + 5000)) problems.push(`${target}: terminationGracePeriodSeconds must exceed SHUTDOWN_TIMEOUT_MS plus the preStop wait`);
    if (!(pod.topologySpreadConstraints ?? []).some((t: { topologyKey: string }) => t.topologyKey === "kubernetes.io/hostname")) problems.push(`${target}: needs a topology spread across nodes`);
    if (!objects.some((o) => o.kind === "PodDisruptionBudget" && matches(o.spec.selector?.matchLabels, d.spec.template.metadata.labels))) problems.push(`${target}: no PodDisruptionBudget`);
    if (!hasPort(d, "metrics") || portsOf(d).find((p) => p.name === "metrics")?.containerPort !== Number(config?.data?.METRICS_PORT)) problems.push(`${target}: its metrics port must be METRICS_PORT`);
    if (opts.replicas === "one" && d.spec.replicas !== 1) problems.push(`${target}: dev runs one replica`);
    if (opts.replicas === "many" && !(d.spec.replicas >= 2)) problems.push(`${target}: needs several replicas`);
  }
  for (const target of ["gateway", "media"]) {
    if (!objects.some((o) => o.kind === "HorizontalPodAutoscaler" && o.spec.scaleTargetRef.name === target)) problems.push(`${target}: no HorizontalPodAutoscaler`);
  }
  if (secret) {
    for (const key of REQUIRED_SECRETS) if (!decode(secret, key)) problems.push(`Secret ${secret.metadata.name} lacks ${key}`);
    if (!/BEGIN PRIVATE KEY/.test(decode(secret, "CALLER_SIGNING_KEY") ?? "")) problems.push("CALLER_SIGNING_KEY is not a PEM private key");
  }
  // Where the processes are told to connect: the services always, the engines when they run here.
  if (config) {
    const urls = TARGETS.filter((t) => t !== "gateway").map((t) => [`${t.toUpperCase()}_URL`, config.data[`${t.toUpperCase()}_URL`]]);
    if (opts.backendsInCluster) urls.push(["NATS_URL", config.data.NATS_URL], ["S3_ENDPOINT", config.data.S3_ENDPOINT], ["DATABASE_URL", decode(secret!, "DATABASE_URL")!]);
    for (const [key, raw] of urls) {
      const url = new URL(String(raw));
      const svc = find("Service", url.hostname);
      const port = Number(url.port || { "postgres:": 5432, "nats:": 4222, "http:": 80 }[url.protocol]);
      if (!svc) problems.push(`${key} points at ${url.hostname}, which is no Service`);
      else if (!svc.spec.ports.some((p: { port: number }) => p.port === port)) problems.push(`${key} points at port ${port} of Service ${url.hostname}, which it does not have`);
    }
  }
  return problems;
}

const haveKustomize = Boolean(kustomizeCommand());
const mustRender = haveKustomize || process.env.CI;
const it = mustRender ? test : test.skip;
if (!mustRender) test("kubectl (or kustomize) is not installed: the manifest tests are skipped (CI requires it)", (t) => t.pass());

const rendered = mustRender ? renderOverlays() : undefined;

it("every overlay renders, and every object is valid against the Kubernetes schemas", (t) => {
  for (const [name, objects] of Object.entries(rendered!)) {
    t.true(objects.length > 20, `${name} renders its objects`);
    t.deepEqual(objects.flatMap(schemaProblems), [], `${name}: schema problems`);
  }
});

it("the references between objects hold, and every target keeps the production rules", (t) => {
  t.deepEqual(referenceProblems(rendered!.base, { replicas: "many", secretFromOverlay: true }), [], "base");
  t.deepEqual(referenceProblems(rendered!.dev, { replicas: "one", backendsInCluster: true }), [], "dev");
  t.deepEqual(referenceProblems(rendered!.prod, { replicas: "many" }), [], "prod");
  // The base leaves the Secret to the overlays (the one reference it may miss).
  t.false(rendered!.base.some((o) => o.kind === "Secret"), "the base ships no secret values");
});

it("the dev overlay runs its engines in the cluster from pinned official images; prod runs none", (t) => {
  const images = rendered!.dev.filter((o) => o.kind === "StatefulSet").map((o) => o.spec.template.spec.containers[0].image as string);
  t.is(images.length, 3);
  t.true(images.some((i) => i.startsWith("postgres:")) && images.some((i) => i.startsWith("nats:")) && images.some((i) => i.startsWith("minio/minio:")));
  for (const i of images) t.regex(i, /:[\w.-]*\d[\w.-]*$/, `${i} is pinned to a release`);
  t.false(rendered!.prod.some((o) => o.kind === "StatefulSet"));
  const prodConfig = rendered!.prod.find((o) => o.kind === "ConfigMap")!;
  t.truthy(prodConfig.data.OTEL_EXPORTER_OTLP_ENDPOINT, "prod exports traces and metrics over OTLP");
});

it("the checker catches broken references", (t) => {
  const broken = (mutate: (objects: K8sObject[]) => void) => {
    const copy = structuredClone(rendered!.dev);
    mutate(copy);
    return referenceProblems(copy, { replicas: "one", backendsInCluster: true });
  };
  const deployment = (o: K8sObject[], name: string) => o.find((x) => x.kind === "Deployment" && x.metadata.name === name)!;
  t.true(broken((o) => { o.find((x) => x.kind === "Service" && x.metadata.name === "media")!.spec.selector["app.kubernetes.io/name"] = "mediaa"; }).some((p) => /selector matches no pod/.test(p)));
  t.true(broken((o) => { deployment(o, "auth").spec.template.spec.containers[0].envFrom[0].configMapRef.name = "missing"; }).some((p) => /ConfigMap missing does not exist/.test(p)));
  t.true(broken((o) => { deployment(o, "social").spec.template.spec.containers[0].readinessProbe.grpc.port = 9999; }).some((p) => /readinessProbe port 9999/.test(p)));
  t.true(broken((o) => { deployment(o, "gateway").spec.template.spec.containers[0].args = ["--import", "tsx", "packages/server/src/main.ts", "--target=gateway"]; }).some((p) => /runs TypeScript/.test(p)));
  t.true(broken((o) => { o.splice(o.findIndex((x) => x.kind === "Service" && x.metadata.name === "nats"), 1); }).some((p) => /NATS_URL points at nats/.test(p)));
  t.deepEqual(schemaProblems({ ...deployment(rendered!.dev, "auth"), spec: { ...deployment(rendered!.dev, "auth").spec, replicas: "two" } }).length, 1, "a wrong type is a schema problem");
});

it("the network-policy component renders valid objects that select the services' pods", (t) => {
  const policy = parseYaml(readFileSync(join(K8S, "components", "network-policy", "network-policy.yaml"), "utf8")) as K8sObject;
  t.deepEqual(schemaProblems(policy), []);
  const pods = rendered!.base.filter((o) => o.kind === "Deployment").map((d) => d.spec.template.metadata.labels);
  t.is(pods.filter((l) => matches(policy.spec.podSelector.matchLabels, l)).length, 5, "the five services, not the gateway");
  const ports = policy.spec.ingress.flatMap((r: { ports: Array<{ port: number }> }) => r.ports.map((p) => p.port));
  t.deepEqual(ports.sort(), [9090, 9464]);
});
