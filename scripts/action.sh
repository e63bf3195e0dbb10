#!/usr/bin/env bash
# The GitHub Action's steps (action.yml calls this; scripts/action-test.sh runs it locally).
#
#   action.sh install   installs tracefault as INPUT_INSTALL says and writes TRACEFAULT_BIN to
#                       $GITHUB_ENV (the next steps' environment) and `bin` to $GITHUB_OUTPUT
#   action.sh run       `tracefault run` on INPUT_SCENARIOS and/or `tracefault exec` of
#                       INPUT_EXEC, against INPUT_BASELINE; writes passed, exit-code and
#                       reports to $GITHUB_OUTPUT; exits 0 (pass), 1 (a gate, check or
#                       regression failed) or 2 (bad input)
#
# Inputs come as INPUT_* variables (action.yml passes each one explicitly). tracefault writes the
# job summary itself where $GITHUB_STEP_SUMMARY is set.
set -uo pipefail

input() { # an input, trimmed; $2 the default
  local v
  v="$(printenv "INPUT_$1" || true)"
  v="${v#"${v%%[![:space:]]*}"}"
  v="${v%"${v##*[![:space:]]}"}"
  printf '%s' "${v:-${2:-}}"
}
truthy() { case "$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]')" in true | yes | 1 | on) return 0 ;; *) return 1 ;; esac; }
out() { if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$1=$2" >>"$GITHUB_OUTPUT"; fi; }
warn() { echo "::warning title=tracefault::$*"; }
fail() { echo "::error title=tracefault::$*"; exit 2; }
words() { printf '%s' "$1" | tr '\n' ' '; } # newline-separated (a YAML block) as space-separated
tmp_root() { if [ -n "${RUNNER_TEMP:-}" ]; then echo "$RUNNER_TEMP"; else dirname "$(mktemp -u)"; fi; }

install() {
  local how version wheel bin
  how="$(input INSTALL pip)"
  version="$(input VERSION)"
  wheel="$(input WHEEL)"
  case "$how" in
    pip)
      local venv
      venv="$(tmp_root)/tracefault-venv-$$"
      command -v python3 >/dev/null || fail "install: pip needs python3 on PATH (actions/setup-python)"
      python3 -m venv "$venv" || fail "install: cannot create a virtualenv at $venv"
      local spec="tracefault${version:+==$version}"
      [ -n "$wheel" ] && spec="$wheel"
      echo "installing $spec into $venv"
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" || fail "install: pip install $spec failed"
      bin="$venv/bin/tracefault"
      ;;
    cargo)
      local root src
      src="$(input SOURCE "${TRACEFAULT_ACTION_PATH:-.}")"
      root="$(tmp_root)/tracefault-cargo"
      command -v cargo >/dev/null || fail "install: cargo is not on PATH"
      echo "cargo install --locked --path $src (a release build: several minutes)"
      cargo install --locked --quiet --path "$src" --root "$root" || fail "install: cargo install failed"
      bin="$root/bin/tracefault"
      ;;
    none)
      if [ -n "${TRACEFAULT_BIN:-}" ]; then
        bin="$TRACEFAULT_BIN"
      else
        bin="$(command -v tracefault || true)"
      fi
      [ -n "$bin" ] || fail "install: none, but no tracefault on PATH and no TRACEFAULT_BIN"
      ;;
    *) fail "install: '$how' is none of pip, cargo, none" ;;
  esac
  [ -x "$bin" ] || fail "install: $bin is not an executable"
  bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  "$bin" --version || fail "install: $bin --version failed"
  if [ -n "${GITHUB_ENV:-}" ]; then echo "TRACEFAULT_BIN=$bin" >>"$GITHUB_ENV"; fi
  if [ -n "${GITHUB_PATH:-}" ]; then dirname "$bin" >>"$GITHUB_PATH"; fi
  out bin "$bin"
}

# Whether a reports folder holds a report to compare with.
has_report() { [ -f "$1/report.json" ]; }

# One command of the run step, in a log group: `step TITLE KIND CMD...` runs CMD, writes its exit
# code as the KIND-exit-code output and keeps the worst code in `worst` (the caller's).
step() {
  local title=$1 kind=$2 code
  shift 2
  echo "::group::$title"
  echo "+ $*"
  "$@"
  code=$?
  echo "::endgroup::"
  echo "tracefault $kind: exit $code"
  out "$kind-exit-code" "$code"
  [ "$code" -gt "$worst" ] && worst=$code
  return 0
}

run() {
  local bin="${TRACEFAULT_BIN:-}"
  [ -n "$bin" ] || bin="$(command -v tracefault || true)"
  [ -n "$bin" ] || fail "no tracefault: run the install step first (or set TRACEFAULT_BIN)"
  local scenarios run_args exec_cmd exec_scenario exec_runs exec_args exec_label baseline reports
  scenarios="$(input SCENARIOS scenarios/)"
  [ "$scenarios" = "-" ] && scenarios=""
  run_args="$(input RUN_ARGS)"
  exec_cmd="$(input EXEC)"
  exec_scenario="$(input EXEC_SCENARIO)"
  exec_runs="$(input EXEC_RUNS 5)"
  exec_args="$(input EXEC_ARGS)"
  exec_label="$(input EXEC_LABEL)"
  baseline="$(input BASELINE)"
  reports="$(input OUT reports)"
  [ -n "$scenarios" ] || [ -n "$exec_cmd" ] || fail "nothing to do: no scenarios and no exec"
  mkdir -p "$reports" || fail "cannot create $reports"
  reports="$(cd "$reports" && pwd)"
  out reports "$reports"

  local change=()
  if [ -n "$baseline" ]; then
    if ! has_report "$baseline" && ! has_report "$baseline/exec"; then
      warn "no baseline: $baseline holds no report yet (a first run?); nothing compared, change gates not checked. Keep this run's reports as the next baseline."
    fi
    truthy "$(input FAIL_ON_REGRESSION false)" && change+=(--fail-on-regression)
  elif truthy "$(input FAIL_ON_REGRESSION false)"; then
    warn "fail-on-regression without a baseline: nothing to compare with"
  fi
  truthy "$(input REQUIRE_BASELINE false)" && change+=(--require-baseline)

  local worst=0
  if [ -n "$scenarios" ]; then
    local paths extra
    read -r -a paths <<<"$(words "$scenarios")"
    read -r -a extra <<<"$(words "$run_args")"
    local cmd=("$bin" run "${paths[@]}" --out "$reports" ${baseline:+--baseline "$baseline"} "${change[@]}" "${extra[@]}")
    step "tracefault run ${paths[*]}" run "${cmd[@]}"
  fi
  if [ -n "$exec_cmd" ]; then
    if [ -z "$exec_scenario" ]; then
      local first
      read -r first _ <<<"$(words "$scenarios")"
      [ -f "$first" ] || fail "exec: say which scenario with exec-scenario (scenarios is not one file)"
      exec_scenario="$first"
    fi
    local agent extra
    # The agent's command, split as the shell would (quotes kept together).
    eval "agent=($exec_cmd)" || fail "exec: cannot split the command: $exec_cmd"
    read -r -a extra <<<"$(words "$exec_args")"
    local cmd=("$bin" exec "$exec_scenario" --runs "$exec_runs" --out "$reports/exec"
      ${exec_label:+--label "$exec_label"} ${baseline:+--baseline "$baseline/exec"} "${change[@]}" "${extra[@]}"
      -- "${agent[@]}")
    step "tracefault exec $exec_scenario -- ${agent[*]}" exec "${cmd[@]}"
  fi
  out exit-code "$worst"
  if [ "$worst" -eq 0 ]; then out passed true; else out passed false; fi
  if [ "$worst" -ne 0 ]; then
    echo "::error title=tracefault::failed (exit $worst): see the job summary and the reports in $reports"
  fi
  return "$worst"
}

case "${1:-}" in
  install) install ;;
  run) run ;;
  *)
    echo "usage: $0 install|run (inputs as INPUT_* variables)" >&2
    exit 2
    ;;
esac
