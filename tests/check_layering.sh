#!/usr/bin/env bash
# Fails when a folder includes what its layer may not use: the dependency direction of
# DESIGN.md (wire <- storage <- actors <- gateway <- tools) and the rule that heavy headers
# (CAF, KJ, RocksDB) stay out of the headers other folders include.
set -u
root="${1:?usage: check_layering.sh SOURCE_DIR}"
fail=0

forbid() {  # forbid FOLDER REGEX WHY [FILE-GLOB]
  local hits
  hits=$(cd "$root" && grep -rnE --include="${4:-*.[ch]pp}" "$2" "$1" 2>/dev/null)
  if [ -n "$hits" ]; then
    printf '%s\n%s\n\n' "$3" "$hits"
    fail=1
  fi
}

forbid wire    '#include "(storage|actors|gateway|tools)/' "wire/ depends on nothing of ours:"
forbid storage '#include "(actors|gateway|tools)/'         "storage/ may use wire/ only:"
forbid actors  '#include "(gateway|tools)/'                "actors/ may use storage/ and wire/ only:"
forbid actors  '#include <(kj|capnp)/'                      "actors/ never includes KJ or Cap'n Proto (plain values cross to gateway/):"
forbid gateway '#include "(storage|tools)/'                "gateway/ reaches the journal only through actors/:"
forbid gateway '#include <(rocksdb|caf)/'                   "gateway/ never includes RocksDB or CAF:"
for dir in wire actors gateway tools tests; do
  forbid "$dir" '#include <rocksdb/' "RocksDB headers never leave storage/:"
done
# Public headers of actors/ use caf/fwd.hpp; only the internal messages.hpp pulls in CAF.
hits=$(cd "$root" && grep -lE '#include <caf/all.hpp>' actors/*.hpp | grep -v '^actors/messages.hpp$')
[ -z "$hits" ] || { printf 'caf/all.hpp in a public actors/ header:\n%s\n' "$hits"; fail=1; }
# No header outside gateway/ and tools/ mentions KJ.
hits=$(cd "$root" && grep -lE '#include <kj/' wire/*.hpp storage/*.hpp actors/*.hpp 2>/dev/null)
[ -z "$hits" ] || { printf 'KJ in a header outside gateway/:\n%s\n' "$hits"; fail=1; }

# catch_discover_tests hands test names to CMake, where ';' splits a list: such a test would
# run under a truncated name that matches nothing, and pass without running.
forbid tests 'TEST_CASE\("[^"]*;' "a test name with ';' would never run under ctest:"

if [ $fail -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
