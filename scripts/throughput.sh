#!/usr/bin/env bash
# Whole-process throughput: simulated calls per second of `tracefault run --jobs N` on the
# bundled suite scaled to many runs. Usage: scripts/throughput.sh [RUNS] [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50000}
jobs=${2:-1}
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
./target/release/tracefault run scenarios/ --runs "$runs" --jobs "$jobs" --out "$out" > /dev/null || true
end=$(date +%s.%N)
calls=$(awk -F, 'NR > 1 { s += $10 * $3 } END { printf "%.0f", s }' "$out/summary.csv")
awk -v c="$calls" -v s="$start" -v e="$end" -v j="$jobs" -v r="$runs" 'BEGIN {
  t = e - s; printf "%d runs/scenario/strategy, --jobs %d: %.0f simulated calls in %.2f s = %.2f M calls/s (%.2f M/s per job)\n", r, j, c, t, c / t / 1e6, c / t / 1e6 / j }'
