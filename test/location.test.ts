import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../lib/errors.ts';
import {
  checkLogName,
  checkObjectKey,
  formatLocation,
  lanceStorageOptions,
  logLocation,
  logUri,
  parseRoot,
  s3ClientConfig,
} from '../lib/storage/location.ts';

function invalid(fn: () => unknown, mention?: string): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(InvalidInputError);
  if (mention) expect((err as Error).message).toContain(mention);
}

describe('parseRoot', () => {
  it('resolves plain paths to absolute folders', () => {
    expect(parseRoot('/data/x')).toEqual({ kind: 'file', dir: '/data/x' });
    expect(parseRoot('/data/x/')).toEqual({ kind: 'file', dir: '/data/x' });
    expect(parseRoot('rel/dir')).toEqual({ kind: 'file', dir: path.resolve('rel/dir') });
    expect(parseRoot('.')).toEqual({ kind: 'file', dir: process.cwd() });
  });

  it('decodes file:// URLs', () => {
    expect(parseRoot('file:///tmp/a%20b/c')).toEqual({ kind: 'file', dir: '/tmp/a b/c' });
    expect(parseRoot('file:///tmp/x/')).toEqual({ kind: 'file', dir: '/tmp/x' });
    expect(parseRoot('FILE:///tmp/x')).toEqual({ kind: 'file', dir: '/tmp/x' });
  });

  it('parses s3://bucket/prefix, normalizing slashes', () => {
    expect(parseRoot('s3://bkt/some/prefix')).toEqual({ kind: 's3', bucket: 'bkt', prefix: 'some/prefix' });
    expect(parseRoot('s3://bkt/some//prefix/')).toEqual({ kind: 's3', bucket: 'bkt', prefix: 'some/prefix' });
    expect(parseRoot('s3://bkt')).toEqual({ kind: 's3', bucket: 'bkt', prefix: '' });
    expect(parseRoot('s3://bkt/')).toEqual({ kind: 's3', bucket: 'bkt', prefix: '' });
  });

  it('rejects empty roots, empty buckets and other schemes, naming the root', () => {
    invalid(() => parseRoot(''), 'root');
    invalid(() => parseRoot('   '), 'root');
    invalid(() => parseRoot('s3:///prefix'), 's3:///prefix');
    invalid(() => parseRoot('s3://'), 's3://');
    invalid(() => parseRoot('gs://bucket/x'), 'gs://bucket/x');
    invalid(() => parseRoot('http://host/x'), 'http://host/x');
    invalid(() => parseRoot('file://otherhost/x'), 'file://otherhost/x');
    invalid(() => parseRoot('s3://bad bucket/x'), 'bad bucket');
  });

  it('accepts bucket names AWS accepts', () => {
    for (const b of ['abc', 'a'.repeat(63), 'my-bucket.v2', '1bucket9', 'a.b-c.d', 'x-s3', 'ab--cd', '1.2.3', '1.2.3.4.5', 'b--usw2-az1--x-s3']) {
      expect(parseRoot(`s3://${b}/p`)).toEqual({ kind: 's3', bucket: b, prefix: 'p' });
    }
  });

  it('rejects bucket names AWS rejects, naming the bucket and the rule, before any I/O', () => {
    const cases: Array<[string, string]> = [
      ['Bad_Bucket', 'only lowercase letters, digits, dots and hyphens'],
      ['UPPER', 'only lowercase letters, digits, dots and hyphens'],
      ['under_score', 'only lowercase letters, digits, dots and hyphens'],
      ['b', '3 to 63 characters'],
      ['ab', '3 to 63 characters'],
      ['a'.repeat(64), '3 to 63 characters'],
      ['-abc', 'begin and end with a letter or digit'],
      ['abc-', 'begin and end with a letter or digit'],
      ['.abc', 'begin and end with a letter or digit'],
      ['abc.', 'begin and end with a letter or digit'],
      ['a..b', 'two adjacent dots'],
      ['192.168.5.4', 'IP address'],
      ['xn--abc', 'xn--'],
      ['sthree-abc', 'sthree-'],
      ['amzn-s3-demo-abc', 'amzn-s3-demo-'],
      ['abc-s3alias', '-s3alias'],
      ['abc--ol-s3', '--ol-s3'],
      ['abc.mrap', '.mrap'],
      ['abc--table-s3', '--table-s3'],
    ];
    for (const [bucket, rule] of cases) {
      let err: unknown;
      try {
        parseRoot(`s3://${bucket}/x`);
      } catch (e) {
        err = e;
      }
      expect(err, bucket).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field, bucket).toBe('root');
      expect((err as Error).message, bucket).toContain(`invalid S3 bucket name ${JSON.stringify(bucket)}`);
      expect((err as Error).message, bucket).toContain(rule);
    }
  });

  it('rejects a prefix S3 cannot store (ill-formed Unicode, or no room under the 1024-byte key limit), accepts any other', () => {
    invalid(() => parseRoot('s3://bkt/a\uD800b'), 'not well-formed Unicode');
    invalid(() => parseRoot('s3://bkt/a\uDC00'), 'not well-formed Unicode');
    invalid(() => parseRoot(`s3://bkt/${'x'.repeat(1000)}`), '1024');
    invalid(() => parseRoot(`s3://bkt/${'é'.repeat(500)}`), '1024'); // 1000 bytes in UTF-8
    for (const prefix of ['a b/c', 'ünïcode/😀', "q'(x)!*", 'a:b@c$d&e+f,g;h=i', 'x'.repeat(900)]) {
      expect(parseRoot(`s3://bkt/${prefix}`)).toEqual({ kind: 's3', bucket: 'bkt', prefix });
    }
  });

  it('formats back', () => {
    expect(formatLocation(parseRoot('s3://bkt/p/q/'))).toBe('s3://bkt/p/q');
    expect(formatLocation(parseRoot('s3://bkt'))).toBe('s3://bkt');
    expect(formatLocation(parseRoot('/tmp/a b'))).toBe('file:///tmp/a%20b');
  });
});

describe('logUri', () => {
  it('builds the local dataset path', () => {
    expect(logUri(parseRoot('/data/root'), 'p1', 'e-2')).toBe('/data/root/datagen_checkpoints/p1/e-2/log.lance');
    expect(logUri(parseRoot('file:///data/root/'), 'p', 'e')).toBe('/data/root/datagen_checkpoints/p/e/log.lance');
  });

  it('builds s3 URIs without double slashes', () => {
    expect(logUri(parseRoot('s3://bkt/pre/fix/'), 'p', 'e')).toBe('s3://bkt/pre/fix/datagen_checkpoints/p/e/log.lance');
    expect(logUri(parseRoot('s3://bkt'), 'p', 'e')).toBe('s3://bkt/datagen_checkpoints/p/e/log.lance');
    expect(logLocation(parseRoot('s3://bkt/x'), 'p', 'e')).toEqual({
      kind: 's3',
      bucket: 'bkt',
      prefix: 'x/datagen_checkpoints/p/e/log.lance',
    });
  });

  it('validates pipeline and experiment names before anything else', () => {
    for (const bad of ['', '.', '..', 'a/b', 'a b', 'x'.repeat(129), 'ü']) {
      invalid(() => logUri(parseRoot('/r'), bad, 'e'), 'pipeline');
      invalid(() => logUri(parseRoot('s3://bkt'), 'p', bad), 'experiment');
    }
    expect(checkLogName('A.b_c-9', 'pipeline')).toBe('A.b_c-9');
    expect(checkLogName('x'.repeat(128), 'experiment')).toHaveLength(128);
  });
});

describe('lanceStorageOptions', () => {
  it('is undefined for local roots', () => {
    expect(lanceStorageOptions(parseRoot('/tmp/x'), { AWS_ENDPOINT_URL_S3: 'http://h:1' })).toBeUndefined();
  });

  it('passes a custom http endpoint, region and static credentials', () => {
    const opts = lanceStorageOptions(parseRoot('s3://bkt/p'), {
      AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:7480',
      AWS_ENDPOINT_URL: 'http://ignored:1',
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'AK',
      AWS_SECRET_ACCESS_KEY: 'SK',
      AWS_SESSION_TOKEN: 'TOK',
    });
    expect(opts).toEqual({
      endpoint: 'http://127.0.0.1:7480',
      allow_http: 'true',
      region: 'eu-west-1',
      aws_access_key_id: 'AK',
      aws_secret_access_key: 'SK',
      aws_session_token: 'TOK',
    });
  });

  it('falls back to AWS_ENDPOINT_URL and AWS_DEFAULT_REGION; https needs no allow_http', () => {
    expect(
      lanceStorageOptions(parseRoot('s3://bkt'), { AWS_ENDPOINT_URL: 'https://minio.local', AWS_DEFAULT_REGION: 'r1' }),
    ).toEqual({ endpoint: 'https://minio.local', region: 'r1' });
  });

  it('leaves credentials to Lance when the environment has none (real S3)', () => {
    expect(lanceStorageOptions(parseRoot('s3://bkt'), {})).toEqual({ region: 'us-east-1' });
    expect(lanceStorageOptions(parseRoot('s3://bkt'), { AWS_ACCESS_KEY_ID: 'only-id', AWS_ENDPOINT_URL_S3: '' })).toEqual({
      region: 'us-east-1',
    });
  });
});

describe('s3ClientConfig', () => {
  it('uses path-style addressing only with a custom endpoint', () => {
    expect(s3ClientConfig({ AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:7480', AWS_REGION: 'x' })).toEqual({
      region: 'x',
      endpoint: 'http://127.0.0.1:7480',
      forcePathStyle: true,
    });
    expect(s3ClientConfig({})).toEqual({ region: 'us-east-1' });
  });
});

describe('checkObjectKey', () => {
  it('accepts relative keys and prefixes', () => {
    expect(checkObjectKey('a/b.json', 'key')).toBe('a/b.json');
    expect(checkObjectKey('', 'prefix')).toBe('');
    expect(checkObjectKey('a/b/', 'prefix')).toBe('a/b');
  });
  it('rejects empty, absolute and dot segments', () => {
    for (const bad of ['', '/a', 'a//b', 'a/../b', './a', 'a/', 'a\0b']) invalid(() => checkObjectKey(bad, 'key'));
    for (const bad of ['/', '..', 'a//']) invalid(() => checkObjectKey(bad, 'prefix'));
  });
});
