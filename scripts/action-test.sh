#!/usr/bin/env bash
# Runs the GitHub Action's steps (scripts/action.sh, as action.yml calls them) locally, with a
# fake runner: $GITHUB_STEP_SUMMARY, $GITHUB_OUTPUT, $GITHUB_ENV and $GITHUB_PATH in a temp folder.
#
#   1. a suite and an exec with a baseline folder that does not exist yet: passes, warns "no baseline"
#   2. the same with run 1's reports as the baseline and fail-on-regression: passes, compares
#   3. an agent that exits 3: fails (exit 1, passed=false), the summary still written
#   4. bad input: exit 2
# and checks that action.yml passes every input action.sh reads.
#
# The binary: $TRACEFAULT_BIN, else target/release/tracefault (built when missing); with
# $TRACEFAULT_WHEEL set, the install step pip-installs that wheel instead. The example agent runs
# on $TRACEFAULT_TEST_PYTHON (default .venv/bin/python, made by scripts/python-env.sh), which
# needs the openai SDK. About 15 s.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
python="${TRACEFAULT_TEST_PYTHON:-$repo/.venv/bin/python}"
if ! "$python" -c "import openai" 2>/dev/null; then
  echo "action-test: $python has no openai SDK (bash scripts/python-env.sh makes .venv)" >&2
  exit 2
fi
if [ -z "${TRACEFAULT_WHEEL:-}" ] && [ -z "${TRACEFAULT_BIN:-}" ]; then
  if [ ! -x target/release/tracefault ]; then
    cargo build --release --locked --quiet
  fi
  export TRACEFAULT_BIN="$repo/target/release/tracefault"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passes=0
failures=0
check() { # a description, then a command that must succeed
  local what="$1"
  shift
  if "$@"; then
    echo "  ok: $what"
    passes=$((passes + 1))
  else
    echo "  FAILED: $what" >&2
    failures=$((failures + 1))
  fi
}
output() { grep -E "^$2=" "$1/output" | tail -1 | cut -d= -f2-; }

# One run of the action: $1 a folder for the fake runner's files; the rest INPUT_*=VALUE pairs.
# Each step gets the runner's variables and the environment the earlier steps wrote to GITHUB_ENV,
# as on GitHub; prints the steps' output to $1/log and leaves the run step's exit code in $1/rc.
action() {
  local dir="$1"
  shift
  mkdir -p "$dir/runner"
  : >"$dir/summary.md"
  : >"$dir/output"
  : >"$dir/env"
  : >"$dir/path"
  local runner=(GITHUB_STEP_SUMMARY="$dir/summary.md" GITHUB_OUTPUT="$dir/output" GITHUB_ENV="$dir/env"
    GITHUB_PATH="$dir/path" RUNNER_TEMP="$dir/runner" GITHUB_ACTIONS=true)
  local install=(INPUT_INSTALL=none)
  if [ -n "${TRACEFAULT_WHEEL:-}" ]; then install=(INPUT_INSTALL=pip INPUT_WHEEL="$TRACEFAULT_WHEEL"); fi
  local rc=0
  env "${runner[@]}" "${install[@]}" "$@" bash scripts/action.sh install >"$dir/log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    # The next step's environment: what the install step wrote to GITHUB_ENV.
    local step_env=()
    while IFS= read -r line; do step_env+=("$line"); done <"$dir/env"
    env "${runner[@]}" "${step_env[@]}" "$@" bash scripts/action.sh run >>"$dir/log" 2>&1 || rc=$?
  fi
  echo "$rc" >"$dir/rc"
  sed 's/^/    | /' "$dir/log" | grep -E '::warning|::error|^tracefault (run|exec): exit|^(PASS|FAIL):' || true
}

suite="scenarios/01-worked-example.toml scenarios/05-terminal-401.toml"
agent="$python examples/openai_agent.py"
started=$(date +%s)

echo "1. no baseline yet"
action "$tmp/1" INPUT_SCENARIOS="$suite" INPUT_RUN_ARGS="--runs 50" INPUT_EXEC="$agent" \
  INPUT_EXEC_SCENARIO=scenarios/01-worked-example.toml INPUT_EXEC_RUNS=2 INPUT_BASELINE="$tmp/none" \
  INPUT_OUT="$tmp/reports-1"
check "exit 0" test "$(cat "$tmp/1/rc")" = 0
check "warns: no baseline" grep -q "::warning title=tracefault::no baseline: $tmp/none holds no report yet" "$tmp/1/log"
check "outputs: passed=true, exit-code=0" test "$(output "$tmp/1" passed)/$(output "$tmp/1" exit-code)" = "true/0"
check "outputs: reports" test "$(output "$tmp/1" reports)" = "$tmp/reports-1"
check "outputs: bin (and TRACEFAULT_BIN in GITHUB_ENV, its folder in GITHUB_PATH)" \
  bash -c "test -x '$(output "$tmp/1" bin)' && grep -q '^TRACEFAULT_BIN=' '$tmp/1/env' && test -s '$tmp/1/path'"
check "the suite's reports" test -s "$tmp/reports-1/report.json" -a -s "$tmp/reports-1/summary.csv"
check "exec's reports in exec/" test -s "$tmp/reports-1/exec/exec.json"
check "the job summary: the suite's and exec's" \
  bash -c "test \$(grep -c '^## tracefault' '$tmp/1/summary.md') -ge 2 && grep -q 'PASS' '$tmp/1/summary.md'"

echo "2. run 1's reports as the baseline, fail-on-regression (the scenarios one a line, as a YAML block)"
action "$tmp/2" INPUT_SCENARIOS="$(tr ' ' '\n' <<<"$suite")" INPUT_RUN_ARGS="--runs 50" INPUT_EXEC="$agent" \
  INPUT_EXEC_SCENARIO=scenarios/01-worked-example.toml INPUT_EXEC_RUNS=2 INPUT_BASELINE="$tmp/reports-1" \
  INPUT_FAIL_ON_REGRESSION=true INPUT_OUT="$tmp/reports-2"
check "exit 0" test "$(cat "$tmp/2/rc")" = 0
check "no 'no baseline' warning" bash -c "! grep -q 'no baseline' '$tmp/2/log'"
check "outputs: passed=true" test "$(output "$tmp/2" passed)" = true
check "compared: comparison.md for the suite and for exec" \
  test -s "$tmp/reports-2/comparison.md" -a -s "$tmp/reports-2/exec/comparison.md"
check "--fail-on-regression passed on" grep -q -- "--baseline $tmp/reports-1 --fail-on-regression" "$tmp/2/log"
check "the job summary: against the baseline" grep -q "Against the baseline" "$tmp/2/summary.md"
check "both scenarios ran" grep -q "^2 scenario(s)" "$tmp/2/summary.md"

echo "3. an agent that exits 3 (exec only)"
action "$tmp/3" INPUT_SCENARIOS=- INPUT_EXEC="$python -c 'import sys; sys.exit(3)'" \
  INPUT_EXEC_SCENARIO=scenarios/01-worked-example.toml INPUT_EXEC_RUNS=1 INPUT_OUT="$tmp/reports-3"
check "exit 1" test "$(cat "$tmp/3/rc")" = 1
check "outputs: passed=false, exit-code=1, exec-exit-code=1" \
  test "$(output "$tmp/3" passed)/$(output "$tmp/3" exit-code)/$(output "$tmp/3" exec-exit-code)" = "false/1/1"
check "an error annotation" grep -q "::error title=tracefault::failed (exit 1)" "$tmp/3/log"
check "the job summary says FAIL" grep -q "FAIL" "$tmp/3/summary.md"
check "no suite ran" test ! -e "$tmp/reports-3/report.json"

echo "4. bad input"
action "$tmp/4" INPUT_SCENARIOS=scenarios/no-such-scenario.toml INPUT_OUT="$tmp/reports-4"
check "a missing scenario: exit 2" test "$(cat "$tmp/4/rc")" = 2
action "$tmp/5" INPUT_INSTALL=bogus
# (INPUT_INSTALL from the pairs wins over the default install: env takes the last assignment.)
check "an unknown install: exit 2" test "$(cat "$tmp/5/rc")" = 2

echo "5. action.yml passes every input action.sh reads, and declares every input it passes"
check "inputs consistent" python3 - <<'PY'
import re, sys
yml = open("action.yml").read()
sh = open("scripts/action.sh").read()
declared = set(re.findall(r"^  ([a-z][a-z0-9-]*):\n    description:", yml.split("\noutputs:")[0], re.M))
passed = dict(re.findall(r"INPUT_([A-Z_]+): \$\{\{ inputs\.([a-z0-9-]+) \}\}", yml))
read = set(re.findall(r'input ([A-Z_]+)', sh)) - {"SOURCE"}
problems = [f"action.sh reads INPUT_{n}, action.yml does not pass it" for n in sorted(read - set(passed))]
problems += [f"INPUT_{n} passes inputs.{i}, which is not declared" for n, i in passed.items() if i not in declared]
problems += [f"INPUT_{n} is not inputs.{n.lower().replace('_', '-')}" for n, i in passed.items()
             if i != n.lower().replace("_", "-")]
unused = declared - set(passed.values()) - {"upload", "artifact-name", "working-directory"}
problems += [f"input {i} is declared but not used" for i in sorted(unused)]
if problems:
    print("\n".join(problems), file=sys.stderr)
sys.exit(1 if problems else 0)
PY

echo "($(($(date +%s) - started)) s)"
echo "action-test: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
