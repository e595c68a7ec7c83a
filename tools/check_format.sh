#!/usr/bin/env bash
# Checks (or with --fix, applies) the formatting of the tracked sources: C and C++ by
# .clang-format, the Python helper by black (line length 120). CI runs it as the ctest `format`.
# Exit 77 (a skip for ctest) when a formatter is missing or the tree is not a git checkout.
set -uo pipefail
cd "$(dirname "$0")/.."
fix=0
[[ ${1:-} == --fix ]] && fix=1
command -v clang-format >/dev/null || { echo "format: clang-format is not installed (apt-get install clang-format)"; exit 77; }
command -v black >/dev/null || { echo "format: black is not installed (apt-get install black)"; exit 77; }
git rev-parse --git-dir >/dev/null 2>&1 || { echo "format: not a git checkout"; exit 77; }
mapfile -t cxx < <(git ls-files 'src/**.cpp' 'src/**.h' 'include/**.h' 'backends/**.cpp' 'backends/**.h' 'backends/**.c' \
  'tests/**.cpp' 'tests/**.h' 'tools/**.cpp' | grep -vE '^tests/adversarial/[a-z]+/|/fixtures/')  # not the cheats' sources nor test fixtures
mapfile -t py < <(git ls-files 'tools/**.py' 'benchmarks/**.py' 'tests/**.py' 'src/**.py' | grep -v '/fixtures/')
rc=0
if ((fix)); then
  clang-format -i --style=file "${cxx[@]}"
  black -q -l 120 "${py[@]}"
  exit 0
fi
clang-format --dry-run -Werror --style=file "${cxx[@]}" 2>&1 | grep -E "^[^ ].*: (error|warning):" | cut -d: -f1 | sort -u |
  sed 's/^/format: not formatted (tools\/check_format.sh --fix): /' | head -50
((PIPESTATUS[0])) && rc=1
if ! black --check -q -l 120 "${py[@]}" 2>/dev/null; then
  black --check -l 120 "${py[@]}" 2>&1 | grep "would reformat" | sed 's/^/format: /' | head -50
  rc=1
fi
exit $rc
