#!/usr/bin/env bash
# Peak memory of a streamed import against the size of its largest conversation: the bundled
# tau-bench conversations, then the same file with one conversation grown to SIZE_MB (its
# messages repeated) put first and put last. Prints the peak RSS of `tracefault inspect`,
# `import --all` and `replay --as-recorded-only` on each, and (peak - peak without it) / the
# conversation's bytes.
# Usage: scripts/import-memory.sh [SIZE_MB]
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-40}
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (apt install time)" >&2; exit 2; }
cargo build --release --quiet
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$size_mb" "$dir" <<'PY'
import json, sys
size, out = int(sys.argv[1]) * 10**6, sys.argv[2]
convs = json.load(open("tests/fixtures/corpus/tau-bench_gpt-4o-airline.json"))
grown = dict(convs[0])
head, body = grown["traj"][:2], grown["traj"][2:]
step = len(json.dumps(body))
grown["traj"] = head + body * (size // step + 1)
big = json.dumps(grown)
open(f"{out}/bytes", "w").write(str(len(big)))
small = [json.dumps(c) for c in convs]
for name, elements in [("none", small), ("first", [big] + small), ("last", small + [big])]:
    with open(f"{out}/{name}.json", "w") as f:
        f.write("[" + ",\n".join(elements) + "]\n")
PY
bytes=$(cat "$dir/bytes")
printf 'largest conversation: %.1f MB\n' "$(echo "$bytes / 1000000" | bc -l)"
peak() { { /usr/bin/time -f '%M' "$@" > /dev/null; } 2>&1 | tail -1; }
for cmd in inspect import replay; do
  args=()
  [ "$cmd" = import ] && args=(--all -o "$dir/out.jsonl")
  [ "$cmd" = replay ] && args=(--as-recorded-only)
  base=$(peak ./target/release/tracefault "$cmd" "$dir/none.json" "${args[@]}")
  for where in first last; do
    kib=$(peak ./target/release/tracefault "$cmd" "$dir/$where.json" "${args[@]}")
    awk -v c="$cmd" -v w="$where" -v p="$kib" -v b="$base" -v n="$bytes" 'BEGIN {
      printf "%-7s big conversation %-5s peak %4.0f MiB (without it %3.0f MiB): %.2f x its size\n",
        c, w, p / 1024, b / 1024, (p - b) * 1024 / n }'
  done
done
