#!/usr/bin/env bash
# Prints the reason of every test the last ctest run skipped, one line each. ctest itself shows
# a skip only as "Skipped" and keeps the test's own explanation for -V; run after the tests
# (CTestCustom.cmake's post-test hook) so that a skipped GPU or browser test says why in the
# normal output.
# ctest writes the running log as LastTest.log.tmp and renames it when it is done, after this
# hook; LastTest.log is then the previous run's.
log="$1/Testing/Temporary/LastTest.log.tmp"
[ -f "$log" ] || exit 0
awk '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; next }
  /^SKIP: / && name != "" {
    sub(/^SKIP: /, "")
    if (!((name, $0) in seen)) printf "skipped %s: %s\n", name, $0
    seen[name, $0] = 1
  }
' "$log"
