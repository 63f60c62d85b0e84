#!/bin/sh
# check-blob-manifests.sh - fails when a kernel source no longer matches the
# hash recorded when its committed blob was built (so nobody ships a blob
# built from older sources). Each blobs/<plugin>/MANIFEST is in sha256sum's
# format with paths relative to the repository root, and must list every
# file in plugins/<plugin>/kernels/.
set -eu
cd "$(dirname "$0")/.."
status=0
for manifest in blobs/*/MANIFEST; do
  [ -e "$manifest" ] || continue
  plugin=$(basename "$(dirname "$manifest")")
  if ! sha256sum --check --quiet --strict "$manifest"; then
    echo "blob manifest: $manifest: sources changed since the blob was built; run 'make blobs'" >&2
    status=1
  fi
  for source in $(find "plugins/$plugin/kernels" -type f | sort); do
    if ! grep -q " $source\$" "$manifest"; then
      echo "blob manifest: $source is not in $manifest; run 'make blobs'" >&2
      status=1
    fi
  done
  count=$(grep -c . "$manifest")
  echo "blob manifest: $plugin: $count kernel source(s) match their blob"
done
exit $status
