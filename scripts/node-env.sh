#!/usr/bin/env bash
# Installs the Vercel AI SDK agent's packages (examples/vercel-ai) with `npm ci` from the
# committed lockfile. Idempotent: it reinstalls only when the lockfile changes.
set -euo pipefail
cd "$(dirname "$0")/../examples/vercel-ai"
if ! command -v npm >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "the Vercel AI SDK tests need Node.js 18 or later and npm: install them and re-run" >&2
    exit 1
  fi
fi
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.tracefault-installed 2>/dev/null)" != "$want" ]; then
  npm ci --silent --no-audit --no-fund
  echo "$want" > node_modules/.tracefault-installed
fi
echo "node $(node --version) · ai $(node -p 'require("./node_modules/ai/package.json").version')"
