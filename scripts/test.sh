#!/usr/bin/env bash
# The test suite: installs the official SDKs and the agent frameworks the wire-mode tests drive
# (Python into .venv, the Vercel AI SDK into examples/vercel-ai/node_modules) and Chromium for the
# report.html tests (idempotent), then runs cargo test. With this script the SDK and framework tests cannot silently skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-env.sh
bash scripts/node-env.sh
bash scripts/browser-env.sh
export TRACEFAULT_REQUIRE_SDKS=1
cargo test --release "$@"
