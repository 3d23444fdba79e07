#!/usr/bin/env bash
# Python kernels through the command line: the torch reference passes replay of the seeds and a
# short campaign with 0 findings, as does a kernel whose supports() declines some shapes; each
# broken kernel of tests/python/bad_kernels.py gives a finding of its own class (kernel-error
# with the exception's line, crash with the signal or exit status, unwritten-output,
# out-of-bounds-write, input-modified, hang); a missing module, function or torch is exit 2 and
# one sentence. Skips (77) where no python3 kvfuzz would use has torch.
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
  echo "SKIP: no python3 kvfuzz would use imports torch (Debian: python3-torch)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cd "$src"

# run CODE -- command...: the exit code must be CODE; output in $tmp/out, $tmp/err.
run() {
  local code=$1
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(tail -5 "$tmp/err")"
}

# one_sentence: stderr is one line naming the command, with WORDS in it.
one_sentence() {
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "expected one line on stderr: $(cat "$tmp/err")"
  grep -qF -- "$1" "$tmp/err" || fail "stderr does not say \"$1\": $(cat "$tmp/err")"
}

ref=python:examples/python/torch_decode.py:decode
bad=python:tests/python/bad_kernels.py

# ---- the reference ---------------------------------------------------------------------------
run 0 -- "$kvfuzz" replay --kernel "$ref" --rule strict corpus/seeds
# The reference reads bf16 caches only: the FP8 seeds are unsupported, every other one runs.
nseeds=$(ls corpus/seeds/*.kvfz | wc -l)
nfp8=$(ls corpus/seeds/*-fp8-*.kvfz | wc -l)
grep -q "$((nseeds - nfp8)) without a kernel failure, 0 with one, $nfp8 unsupported" "$tmp/out" ||
  fail "replay of the seeds: $(tail -3 "$tmp/out")"
run 0 -- "$kvfuzz" fuzz --kernel "$ref" --time "$seconds" --findings "$tmp/ref"
grep -q "findings: 0 new" "$tmp/out" || fail "the reference's campaign: $(tail -8 "$tmp/out")"
grep "cases [0-9]* (" "$tmp/out" | sed 's/^ */torch reference campaign: /'
ls "$tmp/ref"/*.kvfz >/dev/null 2>&1 && fail "the reference has findings: $(ls "$tmp/ref")"

# A kernel with a supports(): only the shapes it accepts run, and they pass.
run 0 -- "$kvfuzz" fuzz --kernel python:tests/python/declared_kernels.py:small_head_dims --time 10 --findings "$tmp/small"
grep -q "findings: 0 new" "$tmp/out" || fail "small_head_dims' campaign: $(tail -8 "$tmp/out")"
grep -q "x head_dim [0-9]* is" "$tmp/out" || fail "small_head_dims declined no shape: $(tail -12 "$tmp/out")"

# ---- broken kernels: FUNCTION CLASS WORDS ------------------------------------------------------
while read -r fn class words; do
  run 1 -- "$kvfuzz" fuzz --kernel "$bad:$fn" --runs 1 --findings "$tmp/$fn"
  report=$(ls "$tmp/$fn/$class"-*.json 2>/dev/null | head -1)
  if [ -z "$report" ]; then
    fail "$fn gave no $class finding: $(ls "$tmp/$fn")"
    continue
  fi
  grep -qF -- "$words" "$report" || fail "$fn's report does not say \"$words\": $(grep -h message "$report")"
  # The finding replays to the same class.
  "$kvfuzz" replay --kernel "$bad:$fn" "${report%.json}.kvfz" >"$tmp/replay" 2>&1
  grep -q "$class" "$tmp/replay" || fail "replay of $fn's finding: $(tail -3 "$tmp/replay")"
done <<'LIST'
raises kernel-error ValueError: planted failure in the Python kernel
segfaults crash "signal": 11
exits crash "exit_code": 7
writes_nothing unwritten-output b 0 h 0 d 0
writes_past_output out-of-bounds-write became 0x
scales_q_in_place input-modified input q
LIST

# A function that never returns: a hang at the deadline, and its interpreter dies with the
# worker that was killed for it.
run 1 -- "$kvfuzz" fuzz --kernel "$bad:hangs" --runs 1 --deadline 3 --findings "$tmp/hangs"
ls "$tmp/hangs"/hang-*.kvfz >/dev/null 2>&1 || fail "hangs gave no hang finding: $(ls "$tmp/hangs")"
sleep 1
if pgrep -f "bad_kernels.py hangs" >/dev/null; then fail "the hung Python worker outlived its kvfuzz worker"; fi

# ---- load errors -------------------------------------------------------------------------------
run 2 -- "$kvfuzz" fuzz --kernel python:kvfuzz_no_such_module:decode --runs 1
one_sentence "no Python module kvfuzz_no_such_module"
run 2 -- "$kvfuzz" replay --kernel python:examples/python/torch_decode.py:nofn corpus/seeds
one_sentence "has no function nofn"
run 2 -- "$kvfuzz" fuzz --kernel "$bad:two_arguments" --runs 1
one_sentence "cannot take kvfuzz's nine arguments"
printf '#!/bin/sh\nexec %s -S "$@"\n' "$py" >"$tmp/python3"
chmod +x "$tmp/python3"
KVF_PYTHON=$tmp/python3 run 2 -- "$kvfuzz" fuzz --kernel "$ref" --runs 1
one_sentence "cannot import torch"
KVF_PYTHON=$tmp/none run 2 -- "$kvfuzz" fuzz --kernel "$ref" --runs 1
one_sentence "KVF_PYTHON names $tmp/none"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "python kernels: all checks passed"
