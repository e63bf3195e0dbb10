#!/usr/bin/env bash
# Installs the Vercel AI SDK agent's packages (examples/vercel-ai), and the real MCP servers
# (examples/mcp-servers), with `npm ci` from the committed lockfiles. Idempotent: it reinstalls
# only when a lockfile changes.
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
# The real MCP servers mcp-proxy is tested in front of (examples/mcp-servers), likewise.
cd ../mcp-servers
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.tracefault-installed 2>/dev/null)" != "$want" ]; then
  npm ci --silent --no-audit --no-fund
  echo "$want" > node_modules/.tracefault-installed
fi
echo "MCP servers: everything $(node -p 'require("./node_modules/@modelcontextprotocol/server-everything/package.json").version') · filesystem $(node -p 'require("./node_modules/@modelcontextprotocol/server-filesystem/package.json").version')"
