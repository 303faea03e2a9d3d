// The common S3 operations with the AWS SDK for JavaScript v3 and its default settings
// (default checksums, lib-storage's multipart Upload, presigned URLs, conditional writes,
// ExpectedBucketOwner) against one endpoint; one line per check, exit 1 if any failed.
//
// Usage: node matrix.mjs http://127.0.0.1:9000 (credentials from AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, region us-east-1).
import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import {
  S3Client, ListBucketsCommand, CreateBucketCommand, PutObjectCommand, GetObjectCommand,
  HeadObjectCommand, CopyObjectCommand, ListObjectsV2Command, DeleteObjectsCommand,
  DeleteBucketCommand,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

const endpoint = process.argv[2];
if (!endpoint) {
  console.error("matrix.mjs: the endpoint is required");
  process.exit(2);
}
const client = new S3Client({ endpoint, region: "us-east-1", forcePathStyle: true });
const MiB = 1024 * 1024;
let failures = 0;

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (err) {
    failures += 1;
    console.log(`FAIL ${name}: ${err?.name ?? ""} ${err?.message ?? err}`);
  }
}

async function refused(code, fn) {
  try {
    await fn();
  } catch (err) {
    if (err?.name === code || err?.Code === code) return;
    throw new Error(`got ${err?.name}: ${err?.message}, want ${code}`);
  }
  throw new Error(`succeeded, want ${code}`);
}

function expectEqual(got, want, what) {
  if (!Buffer.from(got).equals(Buffer.from(want))) {
    throw new Error(`${what}: read ${got.length} bytes, not the ${want.length} written`);
  }
}

async function read(bucket, key) {
  const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key,
    ChecksumMode: "ENABLED" }));
  return Buffer.from(await out.Body.transformToByteArray());
}

const bucket = `js-matrix-${Date.now()}`;
let owner = "";
await check("ListBuckets", async () => {
  owner = (await client.send(new ListBucketsCommand({}))).Owner.ID;
});
await check("CreateBucket", () => client.send(new CreateBucketCommand({ Bucket: bucket })));

// PutObject with the SDK's default checksum (CRC32), and streaming bodies.
const small = randomBytes(100 * 1024);
await check("PutObject (default checksum)", async () => {
  const out = await client.send(new PutObjectCommand({ Bucket: bucket, Key: "small",
    Body: small, ContentType: "application/x-test", Metadata: { colour: "blue" } }));
  const md5 = createHash("md5").update(small).digest("hex");
  if (out.ETag !== `"${md5}"`) throw new Error(`ETag ${out.ETag} is not the body's MD5`);
});
await check("GetObject (checksum validated)", async () => expectEqual(
  await read(bucket, "small"), small, "small"));
await check("HeadObject", async () => {
  const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: "small" }));
  if (head.ContentLength !== small.length || head.Metadata.colour !== "blue" ||
      head.ContentType !== "application/x-test") {
    throw new Error(`answered ${head.ContentLength}, ${JSON.stringify(head.Metadata)}`);
  }
});
await check("PutObject of a stream (aws-chunked, CRC32 trailer)", async () => {
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: "stream",
    Body: Readable.from([small.subarray(0, 50000), small.subarray(50000)]),
    ContentLength: small.length }));
  expectEqual(await read(bucket, "stream"), small, "stream");
});
await check("PutObject (SHA256 checksum)", () => client.send(new PutObjectCommand({
  Bucket: bucket, Key: "sha256", Body: small, ChecksumAlgorithm: "SHA256" })));
await check("PutObject with a wrong CRC32 is refused", () => refused("BadDigest",
  () => client.send(new PutObjectCommand({ Bucket: bucket, Key: "bad-crc", Body: small,
    ChecksumCRC32: "AAAAAA==" }))));

// lib-storage's Upload: a 12 MiB stream in 5 MiB parts.
const big = randomBytes(12 * MiB);
await check("lib-storage Upload (multipart)", async () => {
  const upload = new Upload({ client, partSize: 5 * MiB, queueSize: 3,
    params: { Bucket: bucket, Key: "big", Body: Readable.from([big.subarray(0, 7 * MiB),
      big.subarray(7 * MiB)]) } });
  await upload.done();
  expectEqual(await read(bucket, "big"), big, "big");
});

// Presigned URLs, used with fetch.
await check("presigned PUT and GET", async () => {
  const putUrl = await getSignedUrl(client, new PutObjectCommand({ Bucket: bucket,
    Key: "presigned" }), { expiresIn: 300 });
  const put = await fetch(putUrl, { method: "PUT", body: small });
  if (put.status !== 200) throw new Error(`PUT ${put.status}: ${await put.text()}`);
  const getUrl = await getSignedUrl(client, new GetObjectCommand({ Bucket: bucket,
    Key: "presigned" }), { expiresIn: 300 });
  const get = await fetch(getUrl);
  if (get.status !== 200) throw new Error(`GET ${get.status}`);
  expectEqual(Buffer.from(await get.arrayBuffer()), small, "presigned");
});

// Conditional writes.
await check("PutObject If-None-Match: * on an existing key", () => refused(
  "PreconditionFailed", () => client.send(new PutObjectCommand({ Bucket: bucket,
    Key: "small", Body: "other", IfNoneMatch: "*" }))));
await check("PutObject If-None-Match: * on a new key", () => client.send(
  new PutObjectCommand({ Bucket: bucket, Key: "fresh", Body: "new", IfNoneMatch: "*" })));

// ExpectedBucketOwner.
await check("HeadObject with the right ExpectedBucketOwner", () => client.send(
  new HeadObjectCommand({ Bucket: bucket, Key: "small", ExpectedBucketOwner: owner })));
await check("ListObjectsV2 with another ExpectedBucketOwner", () => refused("AccessDenied",
  () => client.send(new ListObjectsV2Command({ Bucket: bucket,
    ExpectedBucketOwner: "111122223333" }))));

// Copy, list, delete.
await check("CopyObject", async () => {
  await client.send(new CopyObjectCommand({ Bucket: bucket, Key: "copy",
    CopySource: `${bucket}/small` }));
  expectEqual(await read(bucket, "copy"), small, "copy");
});
let keys = [];
await check("ListObjectsV2", async () => {
  const out = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
  keys = (out.Contents ?? []).map((o) => o.Key);
  const want = "big,copy,fresh,presigned,sha256,small,stream";
  if (keys.join(",") !== want) throw new Error(`listed ${keys}`);
});
await check("DeleteObjects (default checksum of the key list)", async () => {
  const out = await client.send(new DeleteObjectsCommand({ Bucket: bucket,
    Delete: { Objects: keys.map((Key) => ({ Key })) } }));
  if ((out.Deleted ?? []).length !== keys.length || (out.Errors ?? []).length) {
    throw new Error(`deleted ${(out.Deleted ?? []).length}, errors ${JSON.stringify(out.Errors)}`);
  }
});
await check("DeleteBucket", () => client.send(new DeleteBucketCommand({ Bucket: bucket })));

if (failures) {
  console.log(`${failures} checks failed`);
  process.exit(1);
}
console.log("all checks passed");
