#!/usr/bin/env bash
# Plugins on the command line: each misbehaving kernel of the test plugin gives a finding of
# its own class in a short campaign, and the finding replays to that class; each load error is
# exit 2 and one sentence; a kernel with limited support gets its cases (under 5% unsupported);
# the example plugin, built out of tree against an installed kvfuzz through pkg-config, passes
# the seed cases and a campaign with no finding.
set -u
kvfuzz=$1
plugin=$2
broken_dir=$3
src=$4
build=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# ---- load errors: exit 2, one line naming the problem ----------------------------------------
load_error() { # spec, words
  "$kvfuzz" kernels --kernel "$1" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "kernels --kernel $1 exited $rc, expected 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "kernels --kernel $1: not one line: $(cat "$tmp/err")"
  grep -q "$2" "$tmp/err" || fail "kernels --kernel $1 does not say \"$2\": $(cat "$tmp/err")"
}
load_error /nonexistent/libx.so "No such file"
echo "not a library" >"$tmp/text.so"
load_error "$tmp/text.so" "not a loadable shared object"
load_error "$broken_dir/libkvf_broken_no_entry.so" "does not export kvf_plugin_v1"
load_error "$broken_dir/libkvf_broken_abi.so" "ABI version 99"
load_error "$broken_dir/libkvf_broken_small.so" "smaller than"
load_error "$broken_dir/libkvf_broken_no_kernels.so" "lists no kernels"
load_error "$broken_dir/libkvf_broken_duplicate.so" "lists kernel same twice"
load_error "$broken_dir/libkvf_broken_null.so" "returned no descriptor"
load_error "$broken_dir/libkvf_broken_states.so" "sets concurrent_states to 65; it must be 0 to 64"
load_error "$broken_dir/libkvf_broken_promises.so" "\"graph-safety\" in the promises"
load_error "$broken_dir/libkvf_broken_stride.so" "kernel entries are 1073741824 bytes; kvfuzz takes a multiple"
load_error "$broken_dir/libkvf_broken_odd.so" "kvfuzz takes a multiple of 8 up to 4096"
# A workspace past the limit is the kernel's error, before any allocation (its size would wrap).
"$kvfuzz" replay --kernel "$broken_dir/libkvf_broken_workspace.so" "$src/corpus/seeds/00-seed-h20kv4.kvfz" \
  >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "asks for a workspace of 18446744073709551516 bytes, over kvfuzz's limit" "$tmp/out" ||
  fail "a kernel asking for 2^64 - 100 bytes of workspace: exit $rc, $(tail -3 "$tmp/out")"
# A plugin's reason and error message of several lines (a tab, a terminal escape) are shown on one.
"$kvfuzz" kernels --kernel "$broken_dir/libkvf_broken_multiline.so" >"$tmp/out" 2>&1 ||
  fail "kernels with a multi-line refusal failed: $(cat "$tmp/out")"
grep -q "first refusal: first line   second line third" "$tmp/out" && ! grep -q $'\e' "$tmp/out" ||
  fail "a multi-line supports() reason is not shown on one line: $(cat -A "$tmp/out")"
"$kvfuzz" replay --kernel "$broken_dir/libkvf_broken_multiline.so" "$src/corpus/seeds/00-seed-h20kv4.kvfz" \
  >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "reported an error from run(): first line   second line third" "$tmp/out" &&
  ! grep -q $'\e' "$tmp/out" && ! grep -q "^  second line" "$tmp/out" ||
  fail "a multi-line run() message: exit $rc, $(cat -A "$tmp/out" | tail -5)"
# An entry without the concurrent_states field (the first version-1 size) still loads.
"$kvfuzz" kernels --kernel "$broken_dir/libkvf_broken_v1.so" >"$tmp/out" 2>&1 ||
  fail "a version-1 entry without concurrent_states does not load: $(cat "$tmp/out")"
grep -q "single" "$tmp/out" || fail "the version-1 entry is not listed: $(cat "$tmp/out")"
load_error "$plugin:nope" "has no kernel nope"
for cmd in replay fuzz minimize; do
  "$kvfuzz" $cmd --kernel "$broken_dir/libkvf_broken_abi.so" "$src/corpus/seeds/00-seed-h20kv4.kvfz" \
    >/dev/null 2>"$tmp/err"
  [ $? -eq 2 ] || fail "$cmd with a broken plugin does not exit 2"
done

# ---- listing ----------------------------------------------------------------------------------
"$kvfuzz" kernels --kernel "$plugin:groups" >"$tmp/out" 2>&1 || fail "kernels --kernel $plugin:groups failed"
grep -q "^    promises    placement,head-permutation,v-scaling (docs/invariance.md)" "$tmp/out" \
  || fail "kernels --kernel does not list the kernel's promises: $(cat "$tmp/out")"
grep -q "groups      1,2,3,4,5,6,8$" "$tmp/out" || fail "groups not listed: $(cat "$tmp/out")"
grep -q "not dispatched" "$tmp/out" || fail "no refusal reason: $(cat "$tmp/out")"

# ---- each misbehaviour is a finding of its own class, and replays to it ----------------------
finding() { # kernel, class
  local dir="$tmp/f-$1"
  "$kvfuzz" fuzz --kernel "$plugin:$1" --runs 12 --seed 3 --jobs 1 --deadline 2 --findings "$dir" \
    >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 1 ] || { fail "fuzz --kernel $1 exited $rc, expected 1: $(tail -3 "$tmp/err")"; return; }
  local f
  f=$(ls "$dir"/"$2"-*.kvfz 2>/dev/null | head -1)
  [ -n "$f" ] || { fail "$1: no $2 finding: $(ls "$dir")"; return; }
  "$kvfuzz" replay --kernel "$plugin:$1" --deadline 2 "$f" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 1 ] || fail "replay of $1's finding exited $rc, expected 1"
  grep -q " $2" "$tmp/out" || fail "$1's finding replays as: $(grep -v '^case' "$tmp/out" | head -1)"
}
finding crash crash
finding abort crash
finding exit crash
finding hang hang
finding nan nonfinite
grep -q '"plan": "test-mode=4"' "$tmp"/f-nan/nonfinite-*.json \
  || fail "the nan finding's report does not carry the kernel's plan facts"
# Without --kernel, a finding replays with the kernel its report records.
"$kvfuzz" replay "$tmp"/f-nan/nonfinite-*.kvfz >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] || fail "replay of the nan finding without --kernel does not fail"
grep -q "kernel $plugin:nan, as the findings' reports record" "$tmp/err" \
  || fail "replay without --kernel does not take the recorded kernel: $(cat "$tmp/err")"
# Two builds of one plugin in two folders: the same bug has the same finding (signature and file
# name), the report names the library apart; a library that moved is one sentence naming
# where to point --kernel.
mkdir -p "$tmp/build-a" "$tmp/build-b"
cp "$plugin" "$tmp/build-a/" && cp "$plugin" "$tmp/build-b/"
lib=$(basename "$plugin")
for b in a b; do
  "$kvfuzz" fuzz --kernel "$tmp/build-$b/$lib:nan" --runs 12 --seed 3 --jobs 1 \
    --findings "$tmp/fs-$b" >/dev/null 2>&1
done
sig_a=$(cd "$tmp/fs-a" 2>/dev/null && ls nonfinite-*.kvfz 2>/dev/null)
sig_b=$(cd "$tmp/fs-b" 2>/dev/null && ls nonfinite-*.kvfz 2>/dev/null)
[ -n "$sig_a" ] && [ "$sig_a" = "$sig_b" ] \
  || fail "two builds of one plugin give different findings: '$sig_a' and '$sig_b'"
grep -q "\"kernel_identity\": \"$lib:nan\"" "$tmp"/fs-a/nonfinite-*.json \
  || fail "the report does not name the kernel without its folder"
grep -q "\"path\": \"$tmp/build-a/$lib\"" "$tmp"/fs-a/nonfinite-*.json \
  || fail "the report does not record the library's path apart"
rm -rf "$tmp/build-a"
"$kvfuzz" replay "$tmp"/fs-a/nonfinite-*.kvfz >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || fail "replay of a finding whose library moved exited $rc, expected 2"
grep -q "not there (moved, or built in another folder): name the library where it is now, as --kernel NEWDIR/$lib:nan" "$tmp/err" \
  || fail "a moved library is not said so: $(cat "$tmp/err")"
finding unwritten unwritten-output
finding oob out-of-bounds-write
finding input-mod input-modified
finding error kernel-error
finding false-support kernel-error

# ---- capability-aware generation --------------------------------------------------------------
"$kvfuzz" fuzz --kernel "$plugin:groups" --runs 300 --seed 5 --jobs 1 --findings "$tmp/f-groups" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "fuzz --kernel groups exited $rc: $(tail -3 "$tmp/err")"
unsupported=$(sed -n 's/.*unsupported \([0-9]*\),.*/\1/p' "$tmp/out" | head -1)
cases=$(sed -n 's/^  cases \([0-9]*\) .*/\1/p' "$tmp/out" | head -1)
[ -n "$cases" ] && [ -n "$unsupported" ] || fail "no summary: $(cat "$tmp/out")"
[ -n "$cases" ] && [ $((unsupported * 20)) -lt "$cases" ] \
  || fail "$unsupported of $cases cases unsupported (5% or more)"
grep -q "skipped .* whose shape the kernel does not support" "$tmp/out" \
  || fail "the summary does not say what was skipped: $(cat "$tmp/out")"
grep -q "not dispatched" "$tmp/out" || fail "the summary does not say why"

# ---- the example plugin, out of tree, through pkg-config ---------------------------------------
# As the README's walk-through does it: install, build the example against the installed
# headers (plugin.h and plugin_helpers.h), and run it with the installed kvfuzz.
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || fail "cmake --install failed"
for h in plugin.h plugin_helpers.h; do
  [ -f "$tmp/prefix/include/kvfuzz/$h" ] || fail "cmake --install does not install kvfuzz/$h"
done
[ -x "$tmp/prefix/bin/kvfuzz" ] && kvfuzz="$tmp/prefix/bin/kvfuzz" \
  || fail "cmake --install does not install bin/kvfuzz"
if command -v pkg-config >/dev/null; then
  PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" cmake -S "$src/examples/plugin-cpu" -B "$tmp/ex" \
    >"$tmp/cfg.log" 2>&1 || fail "the example does not configure: $(tail -5 "$tmp/cfg.log")"
  cmake --build "$tmp/ex" >"$tmp/ex.log" 2>&1 || fail "the example does not build: $(tail -5 "$tmp/ex.log")"
  ex="$tmp/ex/libkvf_example_cpu.so"
  "$kvfuzz" replay --kernel "$ex:example-cpu" "$src/corpus/seeds" >"$tmp/out" 2>&1 \
    || fail "the example fails the seed cases: $(tail -3 "$tmp/out")"
  "$kvfuzz" fuzz --kernel "$ex:example-cpu" --time 20 --seed 9 --findings "$tmp/f-ex" \
    >"$tmp/out" 2>"$tmp/err" || fail "the example plugin's campaign found something: $(tail -5 "$tmp/out")"
  grep -q "0 new signature" "$tmp/out" || fail "the example's campaign summary: $(tail -3 "$tmp/out")"
  # The plugin's own mutants through the benchmark, its reference kernel the control: the same
  # table as the built-in benchmark's.
  "$kvfuzz" mutants --kernel "$ex" --budget 5 --controls-budget 3 --jobs 1 >"$tmp/out" 2>"$tmp/err" \
    || fail "the example's mutants are not all killed: $(tail -3 "$tmp/out") $(cat "$tmp/err")"
  grep -q "^mutant  *class  *kvfuzz  *seconds  *cases finding  *strict  *fa  *fib-bench fi-tests" "$tmp/out" \
    || fail "mutants --kernel does not print the benchmark's columns: $(head -1 "$tmp/out")"
  grep -q "kvfuzz killed 3 of 3 mutants" "$tmp/out" || fail "mutants --kernel: $(tail -1 "$tmp/out")"
  grep -q "example-cpu  *no finding" "$tmp/out" || fail "the example's control: $(grep -A1 controls "$tmp/out")"
else
  fail "pkg-config is not installed (scripts/setup.sh installs it)"
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "plugin command line: all checks passed"
