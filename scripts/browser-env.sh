#!/usr/bin/env bash
# Chromium for the report.html tests (Debian's `chromium` package): they load the report in a
# real headless browser. Idempotent; installs with apt-get (through sudo when not root).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if ! sudo -n true 2>/dev/null; then
    echo "scripts/browser-env.sh: Chromium is missing and installing it needs root: run 'sudo apt-get install chromium'" >&2
    exit 1
  fi
  sudo="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
$sudo apt-get install -y -q --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
