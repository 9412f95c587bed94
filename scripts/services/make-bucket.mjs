// Creates the test bucket on the S3 endpoint from the environment, waiting until the server
// answers (used by scripts/services/rgw.sh start). Works against any S3-compatible server.
import { S3Client, CreateBucketCommand, HeadBucketCommand } from '@aws-sdk/client-s3';

const endpoint = process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
const bucket = process.env.DGCL_TEST_BUCKET ?? 'dgcl-test';
const deadline = Date.now() + Number(process.env.DGCL_MAKE_BUCKET_TIMEOUT_MS ?? 90_000);
const client = new S3Client({
  region: process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
  ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
  maxAttempts: 1,
});

let last;
for (;;) {
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    last = undefined;
  } catch (e) {
    if (e?.name === 'BucketAlreadyOwnedByYou' || e?.name === 'BucketAlreadyExists') last = undefined;
    else last = e;
  }
  if (!last) {
    try {
      await client.send(new HeadBucketCommand({ Bucket: bucket }));
      console.log(`bucket ${bucket} ready at ${endpoint ?? 'AWS'}`);
      process.exit(0);
    } catch (e) {
      last = e;
    }
  }
  if (Date.now() > deadline) {
    console.error(`make-bucket: ${bucket} not ready: ${last?.name ?? ''} ${last?.message ?? last}`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 500));
}
