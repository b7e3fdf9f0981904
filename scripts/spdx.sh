#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Gives every source file of the repository its license line (docs/LICENSING.md):
# `SPDX-License-Identifier: MIT` in the file's own comment syntax, as its first
# line (after a #! line). Files that have one (in their first three lines) are
# left alone, so running it again changes nothing.
#
# usage: scripts/spdx.sh           add the line where it is missing
#        scripts/spdx.sh --check   list the files without it; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = --check ] && check=1
tag="SPDX-License-Identifier: MIT"

comment_for() {  # the license line for file $1, or nothing for a file that takes none
  case "$1" in
    *.cc | *.h | *.proto) echo "// $tag" ;;
    *.map) echo "/* $tag */" ;;
    *.sh | *.py | *.cmake | */CMakeLists.txt | CMakeLists.txt | .ci/run | Containerfile | *.service.in | *.conf | *.env)
      echo "# $tag" ;;
    *.[1-8]) echo ".\\\" $tag" ;;
  esac
}

missing=0
while IFS= read -r -d '' file; do
  line=$(comment_for "$file")
  [ -n "$line" ] && [ -f "$file" ] || continue
  head -n 3 "$file" | grep -q "SPDX-License-Identifier:" && continue
  if [ $check -eq 1 ]; then
    echo "no SPDX line: $file"
    missing=$((missing + 1))
    continue
  fi
  tmp=$(mktemp "$file.spdx.XXXXXX")
  if head -n 1 "$file" | grep -q '^#!'; then
    { head -n 1 "$file"; printf '%s\n' "$line"; tail -n +2 "$file"; } >"$tmp"
  else
    { printf '%s\n' "$line"; cat "$file"; } >"$tmp"
  fi
  chmod --reference="$file" "$tmp"
  mv "$tmp" "$file"
done < <(git ls-files -z)
if [ $check -eq 1 ] && [ $missing -gt 0 ]; then
  echo "spdx.sh: $missing file(s) without a license line; run scripts/spdx.sh" >&2
  exit 1
fi
exit 0
