#!/usr/bin/env bash
# Fails when a tracked file of tests/, tools/ or scripts/ names a fixed
# absolute path under /tmp, /root or /home: such a path exists only on the
# machine where someone made it (temporary folders made through the
# language's API, tempfile / mkdtemp / tmp_path, are fine).
set -euo pipefail
cd "$(dirname "$0")/.."
# A path starts at a quote, a space, '=', '(' or the start of a line.
pattern='(^|["'"'"' =(:])/(tmp|root|home)(/|["'"'"' ]|$)'
if hits=$(git ls-files -z -- tests tools scripts | xargs -0 grep -nIE "$pattern" --); then
  echo "[check_fixed_paths] fixed absolute paths in tracked files (use the models manifest or a temporary folder):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "[check_fixed_paths] no fixed /tmp, /root or /home path in tests/, tools/, scripts/" >&2
