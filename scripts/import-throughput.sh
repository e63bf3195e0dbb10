#!/usr/bin/env bash
# Import throughput and peak memory on one large provider file: the tau-bench conversations in
# tests/fixtures/corpus repeated COPIES times into one JSON array (100 copies = 411 MB), read by
# `tracefault inspect` (and `import --all`). Usage: scripts/import-throughput.sh [COPIES]
set -euo pipefail
cd "$(dirname "$0")/.."
copies=${1:-100}
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (apt install time)" >&2; exit 2; }
cargo build --release --quiet
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
big="$dir/tau-bench-x$copies.json"
python3 - "$copies" "$big" <<'PY'
import sys
copies, out = int(sys.argv[1]), sys.argv[2]
body = open("tests/fixtures/corpus/tau-bench_gpt-4o-airline.json").read().strip()
assert body[0] == "[" and body[-1] == "]"
with open(out, "w") as f:
    f.write("[" + ",".join([body[1:-1]] * copies) + "]\n")
PY
bytes=$(stat -c %s "$big")
measure() {
  local what=$1; shift
  local t0 t1 rss
  t0=$(date +%s.%N)
  rss=$( { /usr/bin/time -f '%M' "$@" > /dev/null; } 2>&1 | tail -1)
  t1=$(date +%s.%N)
  awk -v b="$bytes" -v s="$t0" -v e="$t1" -v r="$rss" -v w="$what" 'BEGIN {
    t = e - s; printf "%-12s %.0f MB in %.2f s = %.0f MB/s, peak RSS %.0f MB\n", w, b / 1e6, t, b / 1e6 / t, r / 1024 }'
}
measure inspect ./target/release/tracefault inspect "$big"
measure "import --all" ./target/release/tracefault import "$big" --all -o "$dir/out.jsonl"
