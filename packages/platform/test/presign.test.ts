/** Presigned URLs are minted for the public endpoint (S3_PUBLIC_ENDPOINT), not the internal one. */
import test from "ava";
import { randomBytes } from "node:crypto";
import { loadConfig } from "../src/config.ts";
import { createS3ObjectStore } from "../src/object-store.ts";

const s3Test = process.env.S3_ENDPOINT ? test : test.skip;

s3Test("presignPut uses S3_PUBLIC_ENDPOINT while the store talks to S3_ENDPOINT", async (t) => {
  const bucket = `cms-presign-${randomBytes(4).toString("hex")}`;
  const cfg = loadConfig({ ...process.env, S3_BUCKET: bucket, S3_PUBLIC_ENDPOINT: "https://files.example.com" }, []).s3!;
  t.is(cfg.publicEndpoint, "https://files.example.com");
  const store = await createS3ObjectStore(cfg);
  t.teardown(async () => {
    const s3 = await import("@aws-sdk/client-s3");
    const admin = new s3.S3Client({ endpoint: cfg.endpoint, region: cfg.region, forcePathStyle: cfg.forcePathStyle, credentials: { accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey } });
    await admin.send(new s3.DeleteBucketCommand({ Bucket: bucket })).catch(() => {});
    admin.destroy();
    store.close();
  });
  const url = new URL((await store.presignPut("u/c/1_x.png", { contentType: "image/png", contentLength: 10, expiresInSeconds: 900 }))!);
  t.is(url.origin, "https://files.example.com");
  t.true(url.pathname.endsWith(`/${bucket}/u/c/1_x.png`));
  t.is(url.searchParams.get("X-Amz-Expires"), "900");
});
