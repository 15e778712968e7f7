#!/usr/bin/env bash
# The one schema: python/brt_dist/config_keys.json, which the Python package
# and bench/peer read instead of declaring keys, must be exactly what the key table prints
# (`brt-dist config keys --json`). A key added, removed or changed in launch/config/config_keys.cpp
# without refreshing the copy fails here, with the difference and the command that refreshes it.
set -uo pipefail
bin=$(realpath "$1")
cd "$(dirname "$0")/../../.."
copy=python/brt_dist/config_keys.json
now=$(mktemp); trap 'rm -f "$now"' EXIT
"$bin" config keys --json > "$now" || { echo "FAIL: brt-dist config keys --json exited $?" >&2; exit 1; }
if ! diff -u "$copy" "$now" --label "$copy (checked in)" --label "brt-dist config keys --json"; then
  echo "FAIL: $copy differs from the key table. Refresh it with:" >&2
  echo "  build/release/launch/brt-dist config keys --json > $copy" >&2
  exit 1
fi
echo "config_keys_json: $copy is the key table's ($(grep -c '"key":' "$copy") keys)"
