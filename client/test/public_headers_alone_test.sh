#!/usr/bin/env bash
# Every public header of the SDK compiles on its own, with nothing on the include path
# but the public folders themselves (and the system's Abseil): a header that reaches into
# the project's internals ("core/...", "wire/...") or forgets an include fails here.
# Usage: public_headers_alone_test.sh <c++ compiler> <public include dir>...
set -euo pipefail
compiler="$1"
shift
include_flags=()
for dir in "$@"; do include_flags+=(-I "$dir"); done
checked=0
for dir in "$@"; do
  for header in "$dir"/ringsync/*.h; do
    name="ringsync/$(basename "$header")"
    if ! echo "#include \"$name\"" |
        "$compiler" -std=c++20 -Wall -Werror -fsyntax-only "${include_flags[@]}" -x c++ -; then
      echo "public header $(basename "$header") does not compile alone"
      exit 1
    fi
    # Only ringsync/*, Abseil and the standard library may be included.
    if grep -E '^#include "' "$header" | grep -vE '^#include "(ringsync|absl)/'; then
      echo "public header $(basename "$header") includes something outside ringsync/ and absl/"
      exit 1
    fi
    checked=$((checked + 1))
  done
done
[[ $checked -gt 0 ]] || { echo "no public headers found in $*"; exit 1; }
echo "$checked public headers compile alone"
