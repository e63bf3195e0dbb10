#!/usr/bin/env bash
# Builds the book (docs/, mdBook) into docs/book/, installing the pinned mdBook into .tools/ first
# (a compile of a few minutes, once). Its reference pages are generated from the code and its
# links checked by `cargo test --test it docs`.
#
#   bash scripts/docs.sh                 install mdBook if needed, build the book
#   bash scripts/docs.sh --install-only  install mdBook if needed (CI does this in the background)
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.5.4
if ! .tools/bin/mdbook --version 2>/dev/null | grep -q "v$version"; then
  # In a temporary folder of its own, never a CARGO_TARGET_DIR shared with the tests' build.
  env -u CARGO_TARGET_DIR cargo install mdbook --locked --version "$version" --no-default-features --features search --root .tools
fi
[ "${1:-}" = "--install-only" ] && exit 0
.tools/bin/mdbook build docs
