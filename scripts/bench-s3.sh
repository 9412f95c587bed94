#!/usr/bin/env bash
# Runs bench/s3.ts against a throwaway Ceph RGW and DynamoDB Local, stopping both after.
set -uo pipefail
cd "$(dirname "$0")/.."
trap 'bash scripts/services/rgw.sh stop >/dev/null 2>&1; bash scripts/services/dynamodb.sh stop >/dev/null 2>&1' EXIT
bash scripts/services/dynamodb.sh start >/dev/null && bash scripts/services/rgw.sh start >/dev/null || exit 1
eval "$(bash scripts/services/rgw.sh env)"
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:${DGCL_DDB_PORT:-8011}"
npx tsx bench/s3.ts "$@"
