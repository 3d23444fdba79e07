#!/usr/bin/env bash
# A plugin of 40 kernels given as PATH.so: `kvfuzz kernels` lists all 40 and `kvfuzz replay`
# runs all 40 on a seed case and passes (there is no cap below the load-time limit, issue 38);
# a command that runs one kernel names them and accepts PATH.so:NAME; a plugin of 4097
# kernels is exit 2 and one sentence naming the limit; and the helper header builds as C++ with -fvisibility=hidden into
# a plugin whose KVF_PLUGIN_EXPORT'ed entry point kvfuzz finds.
set -u
kvfuzz=$1
many=$2
too_many=$3
src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
seed="$src/corpus/seeds/00-seed-h20kv4.kvfz"

"$kvfuzz" kernels --kernel "$many" >"$tmp/out" 2>"$tmp/err" \
  || fail "kernels --kernel PATH.so with 40 kernels failed: $(cat "$tmp/err")"
listed=$(grep -c '^  *k[0-9][0-9] \|^k[0-9][0-9]\|:k[0-9][0-9]' "$tmp/out")
[ "$listed" -eq 40 ] || fail "kernels lists $listed of 40 kernels: $(head -20 "$tmp/out")"
grep -q ":k39" "$tmp/out" || fail "the 40th kernel k39 is not listed"

"$kvfuzz" replay --kernel "$many" --jobs 2 "$seed" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "replay --kernel PATH.so with 40 kernels exited $rc: $(tail -3 "$tmp/err")"
grep -q "1 case(s), 40 kernel run(s): 40 without a kernel failure" "$tmp/out" \
  || fail "replay did not run all 40 kernels: $(grep 'case(s)' "$tmp/out")"
[ "$(grep -c "precision model for .*:k[0-9][0-9]:" "$tmp/out")" -eq 40 ] \
  || fail "replay does not name 40 kernels' models"

# Commands that run one kernel: PATH.so names them all; PATH.so:NAME runs one.
"$kvfuzz" fuzz --kernel "$many" --runs 1 --findings "$tmp/f" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "fuzz --kernel PATH.so with 40 kernels did not exit 2"
grep -q "holds 40 kernels; this command runs one" "$tmp/err" \
  || fail "fuzz does not say the plugin holds 40 kernels: $(cat "$tmp/err")"
"$kvfuzz" fuzz --kernel "$many:k39" --runs 20 --seed 2 --jobs 1 --findings "$tmp/f" \
  >"$tmp/out" 2>"$tmp/err" || fail "fuzz --kernel PATH.so:k39 failed: $(tail -3 "$tmp/out")"

# The limit: one sentence, exit 2.
"$kvfuzz" kernels --kernel "$too_many" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || fail "a plugin of 4097 kernels: exit $rc, expected 2"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "a plugin of 4097 kernels: not one line: $(cat "$tmp/err")"
grep -q "lists 4097 kernels; kvfuzz loads at most 4096 from one library" "$tmp/err" \
  || fail "the limit is not stated: $(cat "$tmp/err")"
"$kvfuzz" replay --kernel "$too_many" "$seed" >/dev/null 2>&1
[ $? -eq 2 ] || fail "replay of a plugin of 4097 kernels does not exit 2"

# The helper header from C++, built with hidden visibility: the entry point is still found.
cxx=$(command -v c++ || command -v g++ || command -v clang++ || true)
if [ -n "$cxx" ]; then
  "$cxx" -std=c++11 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden -I"$src/include" \
    "$src/tests/plugins/cxx_helpers.cpp" -o "$tmp/libcxx.so" 2>"$tmp/err" \
    || fail "the helper header does not build as C++: $(head -5 "$tmp/err")"
  "$kvfuzz" kernels --kernel "$tmp/libcxx.so" >"$tmp/out" 2>&1 \
    || fail "the C++ plugin does not load: $(cat "$tmp/out")"
  "$kvfuzz" replay --kernel "$tmp/libcxx.so" "$seed" >"$tmp/out" 2>&1 \
    || fail "the C++ plugin written with the helpers fails a seed case: $(tail -3 "$tmp/out")"
else
  echo "note: no C++ compiler; the helper header's C++ build is not checked"
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "plugin with many kernels: all checks passed"
