#!/usr/bin/env bash
# Hostile case files through the command: 8 truncations and 4 single-bit flips of each committed
# seed case, 2 of each of every fuzz_case corpus file. Each either decodes (exit 0) or is refused
# with exit 2 and one line on stderr; nothing crashes, hangs or prints more. The decoder sees every
# truncation and more flips of the same files in-process (test_spec_malformed,
# committed_cases_cut_and_flipped): a process per copy is what made this test the suite's longest.
set -u
kvfuzz=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 checked=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

judge() { # file, what
  timeout 20 "$kvfuzz" show "$1" >/dev/null 2>"$tmp/err"
  local rc=$?
  checked=$((checked + 1))
  case $rc in
  0) ;;
  2) [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$2: not one line: $(head -3 "$tmp/err")" ;;
  *) fail "$2: exit status $rc: $(head -3 "$tmp/err")" ;;
  esac
}

sweep() { # file, truncations (0: all), flips
  local f=$1 cuts=$2 flips=$3 name size n i pos bit byte
  name=$(basename "$f")
  size=$(stat -c %s "$f")
  local step=1
  [ "$cuts" -gt 0 ] && step=$(((size + cuts - 1) / cuts))
  for ((n = 0; n < size; n += step)); do
    head -c "$n" "$f" >"$tmp/t.kvfz"
    judge "$tmp/t.kvfz" "$name cut to $n bytes"
  done
  # Bit flips at positions spread over the file, the header's first bytes included.
  for ((i = 0; i < flips && size > 0; i++)); do
    pos=$(((i * 7919) % size))
    bit=$((i % 8))
    cp "$f" "$tmp/b.kvfz"
    byte=$(od -An -tu1 -j "$pos" -N1 "$f" | tr -d ' ')
    printf "$(printf '\\%03o' $((byte ^ (1 << bit))))" |
      dd of="$tmp/b.kvfz" bs=1 seek="$pos" conv=notrunc status=none
    judge "$tmp/b.kvfz" "$name with bit $bit of byte $pos flipped"
  done
}
# A file name holding a newline: the sentence that quotes it stays one line, for a file that
# is missing, one that is malformed, and one the case limits refuse.
refused_one_line() { # what, command...
  local what=$1
  shift
  timeout 20 "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  checked=$((checked + 1))
  [ $rc -eq 2 ] || fail "$what: exit status $rc, not 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$what: not one line: $(head -3 "$tmp/err")"
}
nl_name="$tmp/new
line.kvfz"
head -c 40 "$src/corpus/seeds/00-seed-h20kv4.kvfz" >"$nl_name"
refused_one_line "show of a truncated file named with a newline" "$kvfuzz" show "$nl_name"
refused_one_line "replay of a truncated file named with a newline" "$kvfuzz" replay --kernel cpu-ref "$nl_name"
refused_one_line "show of a missing file named with a newline" "$kvfuzz" show "$tmp/no
such.kvfz"
refused_one_line "gen -o into a missing folder named with a newline" "$kvfuzz" gen -o "$tmp/no
dir/x.kvfz"
rm -f "$nl_name"

# A folder without cases, given where cases are expected: one sentence (in a sanitized build
# the empty listing reached qsort as a null pointer).
mkdir -p "$tmp/no-cases" "$tmp/folder.kvfz"
refused_one_line "replay of a folder without cases" "$kvfuzz" replay --kernel cpu-ref "$tmp/no-cases"
refused_one_line "replay of an empty folder named .kvfz" "$kvfuzz" replay --kernel cpu-ref "$tmp/folder.kvfz"
refused_one_line "export-fib of a folder without cases" "$kvfuzz" export-fib --kernel cpu-ref -o "$tmp/x" "$tmp/no-cases"
rmdir "$tmp/no-cases" "$tmp/folder.kvfz"

# A finding's report (<name>.json) that is a FIFO: replay, which reads reports for the kernel
# they record, goes on without it; minimize, which takes its defaults from it, refuses it. Both
# at once: opening a FIFO blocked them forever.
cp "$src/corpus/seeds/08-page1.kvfz" "$tmp/o-tolerance-fifo.kvfz"
mkfifo "$tmp/o-tolerance-fifo.json"
timeout 20 "$kvfuzz" replay "$tmp/o-tolerance-fifo.kvfz" >/dev/null 2>"$tmp/err"
rc=$?
checked=$((checked + 1))
[ $rc -eq 0 ] || fail "replay of a case whose report is a FIFO: exit status $rc: $(head -3 "$tmp/err")"
refused_one_line "minimize of a case whose report is a FIFO" \
  "$kvfuzz" minimize --kernel cpu-ref -o "$tmp/m.kvfz" "$tmp/o-tolerance-fifo.kvfz"
grep -q "o-tolerance-fifo.json is a FIFO" "$tmp/err" || fail "minimize does not name the FIFO: $(cat "$tmp/err")"
rm -f "$tmp/o-tolerance-fifo.kvfz" "$tmp/o-tolerance-fifo.json"

for f in "$src"/corpus/seeds/*.kvfz; do sweep "$f" 8 4; done
for f in "$src"/corpus/fuzz_case/*.kvfz; do sweep "$f" 2 2; done
[ $failures -eq 0 ] || { echo "$failures failure(s) in $checked files"; exit 1; }
echo "hostile case files: $checked checked, every one decoded or refused in one sentence"
