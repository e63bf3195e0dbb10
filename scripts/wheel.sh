#!/usr/bin/env bash
# Builds the Python wheel (the tracefault binary plus python/tracefault, by maturin; pyproject.toml)
# and tests it as a user gets it: installed into a fresh virtualenv, `tracefault --version` and a
# bundled scenario from the venv's bin/, `python -m tracefault`, `uvx --from WHEEL tracefault`, the
# pytest plugin's tests (python/tests) with the wheel's plugin, and the GitHub Action's steps
# (scripts/action-test.sh) installing this wheel with pip.
#
#   bash scripts/wheel.sh              build (a release build of the crate: ~35 s when
#                                      target/release is fresh, 4-6 min on 2 cores after a
#                                      change to the Rust code), then test
#   bash scripts/wheel.sh --no-build   test the wheel already in target/wheels
#
# Pinned: maturin (in .venv-wheel), and what the test venv installs: pytest, uv, and the openai
# SDK at examples/constraints.txt's version. Needs python3 (>= 3.9) and the PyPI index.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0
UV_VERSION=0.13.8
OPENAI_VERSION="$(sed -n 's/^openai==//p' examples/constraints.txt)"
[ -n "$OPENAI_VERSION" ] || { echo "wheel.sh: no openai pin in examples/constraints.txt" >&2; exit 2; }
crate_version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
started=$(date +%s)
took() { echo "  ($(($(date +%s) - $1)) s)"; }

if [ "${1:-}" != "--no-build" ]; then
  t=$(date +%s)
  if [ "$(.venv-wheel/bin/maturin --version 2>/dev/null)" != "maturin $MATURIN_VERSION" ]; then
    rm -rf .venv-wheel
    python3 -m venv .venv-wheel
    .venv-wheel/bin/pip install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION"
  fi
  echo "== building the wheel (maturin $MATURIN_VERSION, cargo --release --locked)"
  rm -f target/wheels/tracefault-*.whl
  nice -n 10 .venv-wheel/bin/maturin build --release -o target/wheels
  took "$t"
fi
shopt -s nullglob
wheels=(target/wheels/tracefault-"$crate_version"-*.whl)
[ "${#wheels[@]}" -eq 1 ] || { echo "wheel.sh: expected one tracefault-$crate_version wheel in target/wheels, found ${#wheels[@]}" >&2; exit 1; }
wheel="$repo/${wheels[0]}"
bin_bytes=$(python3 -c "import sys, zipfile; print(next(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist() if i.filename.endswith('.data/scripts/tracefault')))" "$wheel")
echo "wheel: $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB ($(stat -c %s "$wheel") bytes; the binary inside: $((bin_bytes / 1024)) KiB unpacked)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
venv="$tmp/venv"
echo "== a fresh virtualenv: pip install the wheel"
t=$(date +%s)
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel"
took "$t"
# Everything below runs away from the source tree, with no TRACEFAULT_BIN: the venv's own binary.
unset TRACEFAULT_BIN
cd "$tmp"

echo "== the venv's bin/tracefault"
test -x "$venv/bin/tracefault"
got="$("$venv/bin/tracefault" --version)"
echo "$got"
[ "$got" = "tracefault $crate_version" ] || { echo "wheel.sh: expected tracefault $crate_version" >&2; exit 1; }
"$venv/bin/tracefault" run "$repo/scenarios/01-worked-example.toml" --runs 20 --out "$tmp/run" >"$tmp/run.log" 2>&1 ||
  { cat "$tmp/run.log"; echo "wheel.sh: tracefault run failed" >&2; exit 1; }
tail -1 "$tmp/run.log"
test -s "$tmp/run/report.json"

echo "== python -m tracefault, and the package's own idea of where the binary is"
[ "$("$venv/bin/python" -m tracefault --version)" = "$got" ]
"$venv/bin/python" - "$venv" <<'PY'
import os, sys, tracefault
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(tracefault.__file__).startswith(venv), tracefault.__file__
assert os.path.realpath(tracefault.find_tracefault_bin()) == os.path.join(venv, "bin", "tracefault")
print(f"tracefault {tracefault.__version__} from {os.path.dirname(tracefault.__file__)}; binary {tracefault.find_tracefault_bin()}")
PY

echo "== pinned test tools: pytest $PYTEST_VERSION, openai $OPENAI_VERSION, uv $UV_VERSION"
t=$(date +%s)
"$venv/bin/pip" install --quiet --disable-pip-version-check "pytest==$PYTEST_VERSION" "openai==$OPENAI_VERSION" "uv==$UV_VERSION"
took "$t"

echo "== uvx --from WHEEL tracefault (offline: the wheel needs nothing else)"
[ "$(UV_CACHE_DIR="$tmp/uv-cache" UV_TOOL_DIR="$tmp/uv-tools" "$venv/bin/uvx" --offline --from "$wheel" tracefault --version)" = "$got" ]
echo "$got"

echo "== the pytest plugin's tests, with the plugin the wheel installed (pytest11 entry point)"
t=$(date +%s)
cd "$repo"
TRACEFAULT_EXPECT_INSTALLED=1 "$venv/bin/python" -m pytest python/tests -p no:cacheprovider -q
took "$t"

echo "== the GitHub Action's steps, installing this wheel with pip"
TRACEFAULT_WHEEL="$wheel" TRACEFAULT_TEST_PYTHON="$venv/bin/python" bash scripts/action-test.sh >"$tmp/action.log" 2>&1 ||
  { cat "$tmp/action.log"; echo "wheel.sh: action-test failed" >&2; exit 1; }
tail -1 "$tmp/action.log"

echo "wheel.sh: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) installs and works; $(($(date +%s) - started)) s"
