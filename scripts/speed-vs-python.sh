#!/usr/bin/env bash
# The engine against the same agent loop written plainly in Python (benches/plain-python/sim.py),
# on one scenario (benches/plain-python/plain-loop.toml), one core each, run alternately. Prints
# each round's simulated calls per CPU-second (user + system of the whole process), the medians
# and their ratios — against the plain loop that renders and reads every result as the engine's
# model does, and against the same loop handed outcomes directly (less work) — and checks that both sides agree on what they simulated (success, loop and
# give-up rates within 4 standard errors, mean calls within 1.5%): a faster loop that simulates
# something else would not count.
# Usage: scripts/speed-vs-python.sh [ROUNDS=3] [ENGINE_RUNS=1000000] [PYTHON_RUNS=100000]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
engine_runs=${2:-1000000}
python_runs=${3:-100000}
python=${PYTHON:-python3}
scenario=benches/plain-python/plain-loop.toml
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# CPU seconds (user + system) of one command, its output to $2.
cpu_seconds() {
  local TIMEFORMAT='%U %S'
  local t
  t=$( { time "${@:2}" > "$1" 2> "$out/stderr"; } 2>&1 ) || { cat "$out/stderr" >&2; exit 2; }
  awk -v t="$t" 'BEGIN { split(t, a, " "); printf "%.3f", a[1] + a[2] }'
}

engine_calls() {
  awk -F, 'NR > 1 { s += $10 * $3 } END { printf "%.0f", s }' "$out/engine/summary.csv"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $("$python" --version 2>&1)"
echo "engine: $engine_runs runs x 2 strategies, --jobs 1; python: $python_runs runs x 2 strategies"
engine_rates=()
python_rates=()
outcome_rates=()
for round in $(seq 1 "$rounds"); do
  t=$(cpu_seconds "$out/engine.log" ./target/release/tracefault run "$scenario" --runs "$engine_runs" --jobs 1 --no-runs-csv --out "$out/engine")
  calls=$(engine_calls)
  engine_rates+=("$(awk -v c="$calls" -v t="$t" 'BEGIN { printf "%.4f", c / t / 1e6 }')")
  echo "round $round: engine $calls calls in $t CPU s = ${engine_rates[-1]} M calls/CPU-s"
  t=$(cpu_seconds "$out/python.csv" "$python" benches/plain-python/sim.py "$python_runs" 7)
  calls=$(awk -F, '$1 == "calls" { print $2 }' "$out/python.csv")
  python_rates+=("$(awk -v c="$calls" -v t="$t" 'BEGIN { printf "%.4f", c / t / 1e6 }')")
  echo "round $round: python $calls calls in $t CPU s = ${python_rates[-1]} M calls/CPU-s"
  t=$(cpu_seconds "$out/outcomes.csv" "$python" benches/plain-python/sim.py "$python_runs" 7 --outcomes-only)
  calls=$(awk -F, '$1 == "calls" { print $2 }' "$out/outcomes.csv")
  outcome_rates+=("$(awk -v c="$calls" -v t="$t" 'BEGIN { printf "%.4f", c / t / 1e6 }')")
  echo "round $round: python --outcomes-only $calls calls in $t CPU s = ${outcome_rates[-1]} M calls/CPU-s"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
e=$(median "${engine_rates[@]}")
p=$(median "${python_rates[@]}")
o=$(median "${outcome_rates[@]}")
awk -v e="$e" -v p="$p" -v o="$o" 'BEGIN {
  printf "median: engine %.2f M calls/CPU-s; python %.3f M calls/CPU-s, ratio %.1fx; python --outcomes-only %.3f M calls/CPU-s, ratio %.1fx\n", e, p, e / p, o, e / o }'

# Both sides simulated the same loop: compare what they measured.
awk -F, -v n_e="$engine_runs" -v n_p="$python_runs" '
  FNR == 1 { next }
  FILENAME ~ /summary.csv$/ { es[$2] = $4; el[$2] = $5; eg[$2] = $8; ec[$2] = $10; next }
  $1 == "calls" { next }
  {
    s = $1; bad = 0
    split("success_rate loop_rate gave_up_rate", names, " ")
    pe[1] = es[s]; pe[2] = el[s]; pe[3] = eg[s]; pp[1] = $3; pp[2] = $4; pp[3] = $5
    for (i = 1; i <= 3; i++) {
      se = sqrt(pe[i] * (1 - pe[i]) / n_e + pp[i] * (1 - pp[i]) / n_p) + 1e-9
      if ((pe[i] - pp[i]) ^ 2 > (4 * se) ^ 2) { printf "DISAGREE %s %s: engine %s, python %s\n", s, names[i], pe[i], pp[i]; bad = 1 }
    }
    if ((ec[s] - $6) ^ 2 > (0.015 * ec[s]) ^ 2) { printf "DISAGREE %s calls_mean: engine %s, python %s\n", s, ec[s], $6; bad = 1 }
    if (!bad) printf "agree %s: success %s / %s, loop %s / %s, calls %s / %s (engine / python)\n", s, es[s], $3, el[s], $4, ec[s], $6
    fail += bad
  }
  END { exit fail > 0 }
' "$out/engine/summary.csv" "$out/python.csv"
