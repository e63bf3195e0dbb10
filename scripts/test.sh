#!/usr/bin/env bash
# The test suite: installs the official Python SDKs that the wire-mode tests drive (into .venv,
# idempotent), then runs cargo test. With this script the SDK tests cannot silently skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-env.sh
export TRACEFAULT_REQUIRE_SDKS=1
cargo test "$@"
