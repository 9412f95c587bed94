#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what the tests need (npm packages, Debian
# packages for Ceph RGW and Java for DynamoDB Local), starts the local S3 and DynamoDB servers,
# runs every vitest project, stops the servers, and prints "N passed, N failed".
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
export DGCL_STATE_DIR="${DGCL_STATE_DIR:-$REPO/.ci/state}"
mkdir -p "$DGCL_STATE_DIR"

# npm ci cannot be used: the lock pins @lancedb/lancedb, whose other-platform builds this
# registry does not serve (see README, "Limits").
if [ ! -d node_modules/@lancedb/lancedb ] || [ ! -x node_modules/.bin/node ] || [ package.json -nt node_modules/.package-lock.json ]; then
  npm install --no-audit --no-fund --loglevel=error || exit 1
fi

# Node 22 (LanceDB 0.39 needs it; Lambda runs it) from the pinned `node` devDependency, also
# when this script is run directly rather than through `npm test` (which puts it first already):
# every node, npx and tsx below, and the servers' helper scripts, run on it.
export PATH="$REPO/node_modules/.bin:$PATH"
node_major=$(node -p 'process.versions.node.split(".")[0]')
echo "node $(node --version) ($(command -v node))"
if [ "$node_major" -lt 22 ]; then
  echo "Node >= 22 is required, got $(node --version); run npm install (the node devDependency)"
  echo "0 passed, 1 failed"
  exit 1
fi

# Debian's Chromium for the report page's browser test (test/report.browser.test.ts, driven by
# playwright-core with the system browser: no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing chromium (apt-get)"
    apt-get update -q </dev/null >&2
    apt-get install -y -q chromium </dev/null >&2
  fi
  command -v chromium >/dev/null 2>&1 || { echo "chromium is missing (apt-get install chromium)"; echo "0 passed, 1 failed"; exit 1; }
fi

cleanup() {
  bash scripts/services/rgw.sh stop >/dev/null 2>&1 || true
  bash scripts/services/dynamodb.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

bash scripts/services/dynamodb.sh start || { echo "DynamoDB Local did not start"; echo "0 passed, 1 failed"; exit 1; }
bash scripts/services/rgw.sh start || { echo "Ceph RGW did not start"; echo "0 passed, 1 failed"; exit 1; }
eval "$(bash scripts/services/rgw.sh env)"
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:${DGCL_DDB_PORT:-8011}"

npx tsc -p tsconfig.json --noEmit
tsc_rc=$?
# dist/ (the compiled package): bin/dgcl.js runs it, and the CLI tests run the bin. A failed
# build counts like a failed type-check.
npm run build --silent || tsc_rc=1

# The simulation spawns its own two workers (both cores): it runs after the other projects
# instead of beside them, so neither slows the other into timeouts.
reports=()
vitest_rc=0
for projects in "--project fast --project package --project servers" "--project sim"; do
  report="$DGCL_STATE_DIR/vitest-${#reports[@]}.json"
  rm -f "$report"
  # shellcheck disable=SC2086
  npx vitest run $projects --reporter=default --reporter=json --outputFile.json="$report" || vitest_rc=1
  reports+=("$report")
done

node -e '
  const fs = require("fs");
  const [tscRc, ...files] = process.argv.slice(1);
  let passed = 0, failed = 0;
  for (const f of files) {
    try {
      const r = JSON.parse(fs.readFileSync(f, "utf8"));
      passed += r.numPassedTests;
      failed += r.numFailedTests + (r.success === false && r.numFailedTests === 0 ? 1 : 0);
    } catch { failed += 1; }
  }
  if (Number(tscRc) !== 0) { console.log("typecheck or build failed"); failed += 1; }
  console.log(`${passed} passed, ${failed} failed`);
' "$tsc_rc" "${reports[@]}"

[ $tsc_rc -eq 0 ] && [ $vitest_rc -eq 0 ]
