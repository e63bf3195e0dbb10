#!/usr/bin/env bash
# Fails when Cargo.toml names a dependency that no source file uses, so unused dependencies
# cannot come back unnoticed (what `cargo machete` does, without installing it).
set -euo pipefail
cd "$(dirname "$0")/.."
unused=()
deps=$(sed -n '/^\[\(dev-\)\?dependencies\]/,/^\[/p' Cargo.toml | grep -E '^[a-zA-Z0-9_-]+ *=' | cut -d= -f1 | tr -d ' ')
for dep in $deps; do
    crate=${dep//-/_}
    if ! grep -rqE --exclude-dir=node_modules "\b${crate}::|\buse ${crate}\b|\b${crate}!" src tests benches examples; then
        unused+=("$dep")
    fi
done
if [ ${#unused[@]} -gt 0 ]; then
    echo "unused dependencies in Cargo.toml: ${unused[*]}" >&2
    exit 1
fi
echo "every dependency in Cargo.toml is used"
