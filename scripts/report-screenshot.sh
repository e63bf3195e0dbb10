#!/usr/bin/env bash
# The README's picture of report.html: the bundled suite's committed report, in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/browser-env.sh
browser=$(command -v chromium || command -v chromium-browser)
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,1400 \
  --virtual-time-budget=30000 --screenshot="$(pwd)/docs/src/images/report.png" "file://$(pwd)/reports/report.html" 2>/dev/null
echo "docs/src/images/report.png"
