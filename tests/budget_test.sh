#!/usr/bin/env bash
# Budgets on the command line (docs/case-format.md, "Budgets"; docs/oracle.md, "Memory"):
# - a 16 KiB case of 4,096 empty sequences at Hq 128, D 1024 is refused by every command that
#   reads a case with exit 2 and one line, within seconds and a few MiB;
# - a 56-byte case of one 2^24-token sequence is judged, and the oracle's memory does not grow
#   with the row: both paths stream it;
# - a malformed KVF_MAX_MEMORY_MIB / KVF_MAX_WORK is refused by name by every command, and
#   an empty one is the default;
# - under an address-space limit (ulimit -v) far below what a stored 2^20-token row would take
#   (about 700 MB), the MPFR path streams it and agrees with the fast path.
set -u
kvfuzz=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The .kvfz v1 header (docs/case-format.md) and one (pages, last) pair per sequence.
le16() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $(($1 >> 8)))"; }
kvfz() { # hq hk d s batch pages last
  {
    printf 'KVFZ\x01\x00\x00\x00'
    printf "\\x$(printf %02x "$1")\\x$(printf %02x "$2")"
    le16 "$3"; le16 "$4"; le16 "$5"
    printf '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
    printf '\x00\x00\x80\x3f'                         # sm_scale 1.0
    printf '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' # q, k, v, reserved
    printf '\x01\x00\x00\x00\x00\x00\x00\x00'         # seed 1
    for ((b = 0; b < $5; b++)); do le16 "$6"; le16 "$7"; done
  }
}
kvfz 1 1 1 1024 1 16384 1024 >"$tmp/long.kvfz"
kvfz 128 1 1024 1 4096 0 0 >"$tmp/empty.kvfz"
kvfz 1 1 1 1024 1 4096 1024 >"$tmp/long22.kvfz"
kvfz 1 1 1 1024 1 1024 1024 >"$tmp/long20.kvfz"
[ "$(stat -c %s "$tmp/long.kvfz")" -eq 56 ] || fail "the long case is not 56 bytes"
[ "$(stat -c %s "$tmp/empty.kvfz")" -eq $((52 + 4 * 4096)) ] || fail "the empty case has the wrong size"

refused() { # what, expected text, command...
  local what=$1 text=$2
  shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout 60 /usr/bin/env "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  t1=$(date +%s.%N)
  [ "$rc" -eq 2 ] || fail "$what: exit status $rc, not 2: $(head -3 "$tmp/err")"
  grep -q "$text" "$tmp/err" || fail "$what: stderr lacks \"$text\": $(head -3 "$tmp/err")"
  [ "$(grep -c . "$tmp/err")" -eq 1 ] || fail "$what: not one line on stderr: $(head -5 "$tmp/err")"
  awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 10) }' || fail "$what: took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s"
}

refused "show empty" "memory budget" "$kvfuzz" show "$tmp/empty.kvfz"
refused "oracle empty" "memory budget" "$kvfuzz" oracle "$tmp/empty.kvfz"
refused "replay empty" "memory budget" "$kvfuzz" replay --kernel cpu-splitkv --rule strict "$tmp/empty.kvfz"

# One row of 2^24 tokens: 64 MiB of tensors; the oracle streams the row (it took 10 GB when it
# kept every token's values), so the whole process stays within a few hundred MiB.
/usr/bin/time -f %M -o "$tmp/rss" timeout 120 "$kvfuzz" oracle --jobs 1 "$tmp/long.kvfz" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "oracle long: exit status $rc: $(head -3 "$tmp/err")"
grep -q 'length=16777216 lse=' "$tmp/out" || fail "oracle long: no result: $(head -3 "$tmp/out")"
rss=$(tail -1 "$tmp/rss")
[ "${rss:-999999999}" -lt 400000 ] || fail "oracle long: $rss KiB resident, not under 400 MiB"
refused "bad KVF_MAX_MEMORY_MIB" "KVF_MAX_MEMORY_MIB must be a decimal integer in \\[1, 1073741824\\]" \
  KVF_MAX_MEMORY_MIB=abc "$kvfuzz" show "$tmp/long.kvfz"
refused "bad KVF_MAX_WORK" "KVF_MAX_WORK must be a decimal integer in \\[1, " \
  KVF_MAX_WORK=010x "$kvfuzz" show "$tmp/long.kvfz"
# Checked at the start of every command, one that reads no case included; empty is the default.
refused "bad KVF_MAX_WORK, no case read" "KVF_MAX_WORK must be a decimal integer" \
  KVF_MAX_WORK=5x "$kvfuzz" kernels
refused "bad KVF_MAX_MEMORY_MIB, no case read" "KVF_MAX_MEMORY_MIB must be a decimal integer" \
  KVF_MAX_MEMORY_MIB=-1 "$kvfuzz" rules
refused "empty KVF_MAX_MEMORY_MIB is the default budget" "memory budget of 2.00 GiB" \
  KVF_MAX_MEMORY_MIB= KVF_MAX_WORK= "$kvfuzz" show "$tmp/empty.kvfz"
# A case file larger than half the memory budget is refused before it is read (a sparse 1 GiB
# file: reading it would take 1 GiB).
truncate -s 1G "$tmp/big.kvfz"
refused "file past the budget" "past the memory budget of 256.00 MiB" \
  KVF_MAX_MEMORY_MIB=256 "$kvfuzz" show "$tmp/big.kvfz"
/usr/bin/time -f %M -o "$tmp/rss" env KVF_MAX_MEMORY_MIB=256 "$kvfuzz" replay "$tmp/big.kvfz" \
  >/dev/null 2>&1
[ "$(tail -1 "$tmp/rss")" -lt 100000 ] || fail "file past the budget: $(tail -1 "$tmp/rss") KiB read"
refused "small KVF_MAX_WORK" "work budget" KVF_MAX_MEMORY_MIB=65536 KVF_MAX_WORK=1000 "$kvfuzz" show "$tmp/long22.kvfz"

# 2^20 tokens through the MPFR path: a stored row would need about 700 MB; 300 MB of address
# space is enough for a streamed one, and its correctly rounded results are the fast path's.
"$kvfuzz" oracle --jobs 1 "$tmp/long20.kvfz" >"$tmp/fast.out" 2>"$tmp/err" ||
  fail "fast oracle long20: $(head -3 "$tmp/err")"
(
  ulimit -v 300000
  timeout 120 "$kvfuzz" oracle --oracle mpfr --jobs 1 "$tmp/long20.kvfz" >"$tmp/mpfr.out" 2>"$tmp/err"
  echo $? >"$tmp/rc"
)
rc=$(cat "$tmp/rc")
[ "$rc" -eq 0 ] || fail "ulimit -v: MPFR path exit status $rc: $(head -3 "$tmp/err")"
# The rounded values (hex bits) must agree; the exact values differ in their last digits.
strip() { sed -E 's/ exact [^ ]+//' "$1"; }
[ "$rc" -ne 0 ] || diff <(strip "$tmp/fast.out") <(strip "$tmp/mpfr.out") >/dev/null ||
  fail "ulimit -v: the MPFR path's rounded results differ from the fast path's"

[ "$failures" -eq 0 ] && echo "budget: all checks passed"
exit $((failures > 0))
