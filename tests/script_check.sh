# Sourced by the command-line test scripts: a scratch folder $tmp removed on exit, a failure
# counter with fail(), expect() for one command's exit code and error sentence, and finish()
# for the verdict. Set expect_lines before expect() to allow an error of more lines (default 1).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
expect_lines=1

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE PATTERN -- command...: the exit code, and (PATTERN not empty) a stderr of at most
# $expect_lines lines matching PATTERN. Standard output lands in $tmp/out, stderr in $tmp/err.
expect() {
  local code=$1 pattern=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(cat "$tmp/err")"
  if [ -n "$pattern" ]; then
    grep -Eq -e "$pattern" "$tmp/err" || fail "$*: stderr does not match /$pattern/: $(cat "$tmp/err")"
    [ "$(wc -l <"$tmp/err")" -le "$expect_lines" ] || fail "$*: error is not one sentence: $(cat "$tmp/err")"
  fi
}

# finish NAME: "NAME: all checks passed" and status 0, or the failure count and status 1.
finish() {
  if [ "$failures" -gt 0 ]; then
    echo "$1: $failures failure(s)"
    return 1
  fi
  echo "$1: all checks passed"
}
