#!/usr/bin/env bash
# What a Python kernel declares, through the command line, with no torch needed: a stand-in torch
# (tests/python/stub_torch) lets kernels load and answer supports() wherever python3 runs.
#   - Without KVF_PYTHON, the first python3 that imports torch runs the kernels, the PATH's before
#     /usr/bin/python3, and kvfuzz says which on stderr, once.
#   - A kernel's kvfuzz_supports decides which shapes `kvfuzz kernels` lists and which shapes a
#     campaign spends its cases on; a declined shape is unsupported, never a finding.
#   - An exception in kvfuzz_supports is a kernel-error finding carrying its line.
#   - A malformed kvfuzz_precision or kvfuzz_supports is exit 2 and one sentence.
#   - A kernel declaring FP8 caches (tests/python/fp8_kernels.py) is exit 2 and one sentence under
#     a torch without float8 dtypes; under a stand-in for a later one (KVF_STUB_TORCH_FLOAT8=1)
#     `kvfuzz kernels` lists its FP8 caches, a case of a dtype it does not declare is unsupported,
#     and each malformed FP8 declaration is exit 2 and one sentence.
# Skips (77) where there is no python3.
set -u
kvfuzz=$1
src=$2
py=$(command -v python3 || true)
[ -n "$py" ] || { [ -x /usr/bin/python3 ] && py=/usr/bin/python3; }
if [ -z "$py" ]; then
  echo "SKIP: no python3 on the PATH or in /usr/bin"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cd "$src"
export PYTHONDONTWRITEBYTECODE=1
unset KVF_PYTHON

# A python3 that finds the stand-in torch, first on the PATH.
mkdir "$tmp/bin"
printf '#!/bin/sh\nPYTHONPATH=%s/tests/python/stub_torch exec %s "$@"\n' "$src" "$py" >"$tmp/bin/python3"
chmod +x "$tmp/bin/python3"
export PATH="$tmp/bin:$PATH"

# run CODE -- command...: the exit code must be CODE; output in $tmp/out, $tmp/err.
run() {
  local code=$1
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(tail -5 "$tmp/err")"
}

k=python:tests/python/declared_kernels.py

# ---- the interpreter's choice, said once ------------------------------------------------------
run 0 -- "$kvfuzz" kernels --kernel "$k:small_head_dims" --kernel "$k:declines_all"
said="kvfuzz: python kernels run under $tmp/bin/python3 (imports torch)"
[ "$(grep -cF -- "$said" "$tmp/err")" -eq 1 ] || fail "stderr does not say \"$said\" once: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "stderr has more than the choice: $(cat "$tmp/err")"
# ---- supports() decides the shapes listed -----------------------------------------------------
grep -q "head dims   32,64,80,96,128$" "$tmp/out" || fail "kernels lists other head dims: $(cat "$tmp/out")"
grep -qF "first refusal: head_dim 192 is over 128" "$tmp/out" || fail "kernels gives no reason: $(cat "$tmp/out")"
grep -qF "first refusal: this kernel declines every shape" "$tmp/out" || fail "declines_all: $(cat "$tmp/out")"

# ---- a campaign spends no case on a declined shape, and finds nothing ------------------------------
run 0 -- "$kvfuzz" fuzz --kernel "$k:declines_all" --runs 3 --findings "$tmp/declines"
grep -q "unsupported 3," "$tmp/out" || fail "declines_all's cases are not unsupported: $(grep cases "$tmp/out")"
grep -q "findings: 0 new" "$tmp/out" || fail "declines_all has findings: $(tail -4 "$tmp/out")"
grep -qF "x this kernel declines every shape" "$tmp/out" || fail "the skipped shapes' reason is missing: $(cat "$tmp/out")"
ls "$tmp/declines"/*.kvfz >/dev/null 2>&1 && fail "declines_all has findings: $(ls "$tmp/declines")"
# The seed's shape replays as unsupported.
run 0 -- "$kvfuzz" replay --kernel "$k:declines_all" corpus/seeds/01-mixed-lengths.kvfz
grep -q "1 unsupported" "$tmp/out" || fail "replay of a declined shape: $(tail -4 "$tmp/out")"

# ---- an exception in supports() is the kernel's error ---------------------------------------------
run 1 -- "$kvfuzz" fuzz --kernel "$k:supports_raises" --runs 1 --findings "$tmp/raises"
report=$(ls "$tmp/raises"/kernel-error-*.json 2>/dev/null | head -1)
if [ -z "$report" ]; then
  fail "supports_raises gave no kernel-error finding: $(ls "$tmp/raises")"
else
  grep -qF "kvfuzz_supports raised ValueError: planted failure in supports" "$report" ||
    fail "the finding does not carry the exception: $(grep -h message "$report")"
fi

# ---- malformed attributes: exit 2, one sentence -----------------------------------------------------
while read -r fn words; do
  run 2 -- "$kvfuzz" fuzz --kernel "$k:$fn" --runs 1
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$fn: not one sentence: $(cat "$tmp/err")"
  grep -qF -- "$words" "$tmp/err" || fail "$fn: stderr does not say \"$words\": $(cat "$tmp/err")"
done <<'LIST'
precision_not_a_string kvfuzz_precision is 16 of type int, not a string
precision_too_long kvfuzz_precision is 66 characters long
precision_bad_character has the character 'B'
precision_empty kvfuzz_precision is empty
supports_not_callable kvfuzz_supports is 3 of type int, not a function
LIST

# ---- FP8 caches (tests/python/fp8_kernels.py) -----------------------------------------------------
f=python:tests/python/fp8_kernels.py
# The stand-in torch has no float8 dtypes (a torch before 2.1): a kernel declaring FP8 caches is
# exit 2 and one sentence; one that does not loads.
run 2 -- "$kvfuzz" kernels --kernel "$f:reference"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "FP8 on an old torch: not one sentence: $(cat "$tmp/err")"
grep -qF "fp8_kernels.reference declares e4m3 caches (kvfuzz_kv_dtypes) but torch 0+kvfuzz.stub under" "$tmp/err" ||
  fail "FP8 on an old torch: $(cat "$tmp/err")"
grep -qF "has no torch.float8_e4m3fn, as FP8 tensors need torch 2.1 or later" "$tmp/err" ||
  fail "FP8 on an old torch: $(cat "$tmp/err")"
run 0 -- "$kvfuzz" kernels --kernel "$f:bf16_only"
grep -qF "FP8" "$tmp/out" && fail "bf16_only is listed with FP8 caches: $(cat "$tmp/out")"
# A stand-in for a later torch: listed as taking FP8 caches, and what it declares is shown.
export KVF_STUB_TORCH_FLOAT8=1
run 0 -- "$kvfuzz" kernels --kernel "$f:reference" --kernel "$f:e4m3_tensor"
grep -qF "FP8 caches e4m3,e5m2 with tensor,head,token scales" "$tmp/out" || fail "reference's declaration: $(cat "$tmp/out")"
grep -qF "FP8 caches e4m3 with tensor scales" "$tmp/out" || fail "e4m3_tensor's declaration: $(cat "$tmp/out")"
[ "$(grep -cF "bf16 and FP8 with scales" "$tmp/out")" -eq 2 ] || fail "kernels does not list FP8 caches: $(cat "$tmp/out")"
# A case with caches the kernel does not declare is unsupported, never a launch.
run 0 -- "$kvfuzz" gen --preset page1 --k-dtype e5m2 --scales head -o "$tmp/e5m2.kvfz"
run 0 -- "$kvfuzz" replay --kernel "$f:e4m3_tensor" "$tmp/e5m2.kvfz"
grep -q "1 unsupported" "$tmp/out" || fail "e4m3_tensor ran an e5m2 case: $(tail -4 "$tmp/out")"
# Malformed declarations: exit 2, one sentence.
while read -r fn words; do
  run 2 -- "$kvfuzz" fuzz --kernel "$f:$fn" --runs 1
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$fn: not one sentence: $(cat "$tmp/err")"
  grep -qF -- "$words" "$tmp/err" || fail "$fn: stderr does not say \"$words\": $(cat "$tmp/err")"
done <<'LIST'
dtypes_not_a_string kvfuzz_kv_dtypes is 8 of type int, not a string naming KV cache dtypes
dtypes_unknown names 'fp4', which is not a KV cache dtype (bf16, e4m3, e5m2)
scales_unknown names 'channel', which is not a scale granularity (none, tensor, head, token)
scales_without_fp8 kvfuzz_kv_dtypes names no FP8 dtype (e4m3, e5m2), and scales dequantize FP8 caches only
fp8_without_scales names no scales (tensor, head, token), and kvfuzz draws FP8 caches only for kernels that take scales
no_scale_keywords but not the keyword arguments k_scale and v_scale that carry the scales
LIST
unset KVF_STUB_TORCH_FLOAT8

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "python kernel declarations: all checks passed"
