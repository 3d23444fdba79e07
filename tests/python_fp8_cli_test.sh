#!/usr/bin/env bash
# Python kernels reading FP8 KV caches, through the command line, with a real torch: a PyTorch
# reference that dequantizes FP8 (tests/python/fp8_kernels.py:reference, declared e4m3 and e5m2
# with tensor, head and token scales) is listed as taking FP8 caches, passes `strict` on
# generated FP8 cases of every dtype pair and granularity (none unsupported), and finishes a
# short campaign with 0 findings and FP8 cases judged; a kernel declaring bf16 only gets none of
# those cases. Skips (77) where the python3 kvfuzz would use has no torch with float8 dtypes
# (torch 2.1 or later).
#   python_fp8_cli_test.sh KVFUZZ SOURCE_DIR
# KVF_PYTHON picks the interpreter (as for kvfuzz); KVF_PYTHON_FUZZ_SECONDS the campaign's length
# (default 20).
set -u
kvfuzz=$1
src=$2
seconds=${KVF_PYTHON_FUZZ_SECONDS:-20}
# The interpreter kvfuzz runs kernels under: KVF_PYTHON, else the first of the PATH's python3 and
# /usr/bin/python3 that imports torch.
py=${KVF_PYTHON:-}
if [ -z "$py" ]; then
  for candidate in "$(command -v python3)" /usr/bin/python3; do
    if [ -x "$candidate" ] && "$candidate" -c 'import torch' >/dev/null 2>&1; then
      py=$candidate
      break
    fi
  done
fi
if [ -z "$py" ] || ! "$py" -c 'import torch' >/dev/null 2>&1; then
  echo "SKIP: no python3 kvfuzz would use imports torch"
  exit 77
fi
if ! "$py" -c 'import sys, torch; sys.exit(0 if hasattr(torch, "float8_e4m3fn") else 1)' >/dev/null 2>&1; then
  echo "SKIP: the torch of $py ($("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)) has no float8 dtypes; FP8 tensors need torch 2.1 or later"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cd "$src"
export PYTHONDONTWRITEBYTECODE=1

# run CODE -- command...: the exit code must be CODE; output in $tmp/out, $tmp/err.
run() {
  local code=$1
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(tail -5 "$tmp/err")"
}

ref=python:tests/python/fp8_kernels.py:reference

# ---- declared: listed as taking FP8 caches ------------------------------------------------------
run 0 -- "$kvfuzz" kernels --kernel "$ref"
grep -qF "bf16 and FP8 with scales" "$tmp/out" || fail "kernels does not list FP8 caches: $(cat "$tmp/out")"

# ---- generated FP8 cases: PRESET K-DTYPE V-DTYPE SCALES EXTRA... ---------------------------------
mkdir "$tmp/cases"
n=0
while read -r preset kd vd scales extra; do
  n=$((n + 1))
  # shellcheck disable=SC2086 # EXTRA is words on purpose
  run 0 -- "$kvfuzz" gen --preset "$preset" --seed "$n" --k-dtype "$kd" --v-dtype "$vd" \
    --scales "$scales" $extra -o "$tmp/cases/$n-$preset-$kd-$vd-$scales.kvfz"
done <<'LIST'
seed-h20kv4 e4m3 e4m3 tensor
seed-h20kv4 e5m2 e5m2 tensor --k-scale 0.375 --v-scale 3
mixed-lengths e4m3 e4m3 head --scale-spread 4 --fine-scales
mixed-lengths e5m2 e4m3 head --scale-spread 2
empty-sequences e4m3 e5m2 token --scale-spread 3
tail-nan e5m2 e5m2 token --fine-scales
gqa7 e4m3 e4m3 token --scale-spread 6 --fine-scales
gqa16-d256 e5m2 e5m2 head --k-scale 1e-30 --v-scale 1e30
page1 e4m3 e5m2 tensor --k-scale 1e25 --v-scale 1e-25
page256 e4m3 e4m3 head --scale-spread 8
subnormal-values e5m2 e5m2 token
huge-logits e4m3 e4m3 tensor
shared-prefix e4m3 e4m3 none
page1 bf16 e5m2 none
LIST
run 0 -- "$kvfuzz" replay --kernel "$ref" --rule strict "$tmp/cases"
grep -q "$n without a kernel failure, 0 with one, 0 unsupported" "$tmp/out" ||
  fail "replay of the FP8 cases: $(tail -4 "$tmp/out")"
grep -qF "passes $n cases" "$tmp/out" || fail "the FP8 cases do not pass strict: $(tail -6 "$tmp/out")"
# A kernel that declares bf16 only runs none of them (each has an FP8 cache).
run 0 -- "$kvfuzz" replay --kernel python:examples/python/torch_decode.py:decode "$tmp/cases"
grep -q "0 without a kernel failure, 0 with one, $n unsupported" "$tmp/out" ||
  fail "a bf16 kernel ran FP8 cases: $(tail -4 "$tmp/out")"

# ---- a campaign: FP8 cases judged, 0 findings ---------------------------------------------------
run 0 -- "$kvfuzz" fuzz --kernel "$ref" --time "$seconds" --findings "$tmp/findings"
grep -q "findings: 0 new" "$tmp/out" || fail "the FP8 reference's campaign: $(tail -8 "$tmp/out")"
fp8=$(sed -n 's/^ *kv caches: \([0-9]*\) of the judged cases had FP8 caches.*/\1/p' "$tmp/out")
[ "${fp8:-0}" -gt 0 ] || fail "the campaign judged no FP8 case: $(tail -12 "$tmp/out")"
grep "cases [0-9]* (" "$tmp/out" | sed 's/^ */FP8 reference campaign: /'
echo "FP8 cases judged in the campaign: ${fp8:-0}"
ls "$tmp/findings"/*.kvfz >/dev/null 2>&1 && fail "the FP8 reference has findings: $(ls "$tmp/findings")"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "python FP8 kernels: all checks passed"
