#!/usr/bin/env bash
# Prints the reason of every test the last ctest run skipped, one line each. ctest itself shows
# a skip only as "Skipped" and keeps the test's own explanation for -V; run after the tests
# (CTestCustom.cmake's post-test hook) so that a skipped GPU or browser test says why in the
# normal output.
# ctest writes the running log as LastTest.log.tmp and renames it when it is done, after this
# hook; LastTest.log is then the previous run's.
log="$1/Testing/Temporary/LastTest.log.tmp"
[ -f "$log" ] || exit 0
# A test of check.h names its parts ("== part"); when only some parts skipped, the line names
# them, so that a test that ran is not read as skipped.
awk '
  function flush() {
    for (k = 1; k <= nr; k++) {
      r = reasons[k]
      if (parts == 0 || skipped_parts[r] == parts) printf "skipped %s: %s\n", name, r
      else printf "skipped in %s (%s): %s\n", name, which[r], r
    }
    nr = 0; parts = 0; part = ""
    delete skipped_parts; delete which; delete known
  }
  /^[0-9]+\/[0-9]+ Testing: / { flush(); name = $3; next }
  /^== / && name != "" { parts++; part = substr($0, 4); next }
  /^SKIP: / && name != "" {
    sub(/^SKIP: /, "")
    if (!($0 in known)) { known[$0] = 1; reasons[++nr] = $0 }
    skipped_parts[$0]++
    which[$0] = which[$0] == "" ? part : which[$0] ", " part
  }
  END { flush() }
' "$log"
