#!/usr/bin/env bash
# `kvfuzz fuzz --devices`: one worker group per listed device, each pinned by
# CUDA_VISIBLE_DEVICES; a device whose worker cannot start is retired while the others go on
# (test-device1-broken cannot start in a worker pinned to device 1); the summary, the
# statistics and the report give each device's rate; bad lists are refused with one sentence.
# No GPU is needed: the pinning is the worker's environment.
set -u
kvfuzz=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
run() { # run CODE -- command...
  local code=$1
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(tail -3 "$tmp/err")"
}
has() { grep -q -- "$2" "$1" || fail "$1 lacks \"$2\": $(tail -12 "$1")"; }

export CUDA_VISIBLE_DEVICES=0,1
# Device 1 dies, device 0 carries the campaign; listed the other way round so that the
# retirement cannot come from the order.
run 0 -- "$kvfuzz" fuzz --kernel test-device1-broken --devices 1,0 --runs 200 --seed 4 \
  --findings "$tmp/f1" --stats "$tmp/s1.json"
has "$tmp/err" "device 1: kernel test-device1-broken could not start"
has "$tmp/err" "the campaign goes on with 1 worker(s)"
has "$tmp/out" "devices: 2, 1 worker(s) each"
has "$tmp/out" "device 0: 200 cases"
has "$tmp/out" "device 1: 0 cases"
has "$tmp/out" "retired after"
has "$tmp/out" "placement:"
python3 - "$tmp/s1.json" <<'PY' || fail "the statistics do not hold the per-device figures"
import json, sys
d = json.load(open(sys.argv[1]))["sources"][0]["devices"]
by = {x["device"]: x for x in d}
assert by[0]["cases"] == 200 and not by[0]["retired"], d
assert by[1]["cases"] == 0 and by[1]["retired"] and "device 1" in by[1]["why"], d
PY
run 0 -- "$kvfuzz" report -o "$tmp/rep" "$tmp/s1.json"
has "$tmp/rep/index.html" "device 0: 200 cases"
has "$tmp/rep/index.html" "retired after"

# Two workers on one device (both pinned to it): the campaign runs on both.
run 0 -- "$kvfuzz" fuzz --kernel cpu-ref --devices 0 --workers 2 --runs 100 --seed 5 \
  --findings "$tmp/f2"
has "$tmp/out" "devices: 1, 2 worker(s) each"
has "$tmp/out" "device 0: 100 cases"
has "$tmp/out" "kernel .* in 2 worker(s)"

# Every device dead: the kernel cannot start, exit 2.
run 2 -- "$kvfuzz" fuzz --kernel test-device1-broken --devices 1 --runs 20 --findings "$tmp/f3"
has "$tmp/err" "could not start"

# `all` is every visible device; lists are checked before anything runs.
run 0 -- "$kvfuzz" fuzz --kernel cpu-ref --devices all --runs 30 --findings "$tmp/f4"
has "$tmp/out" "devices: 2, 1 worker(s) each"
for bad in "0,0" "5" "x" "0,,1" "" "-1"; do
  run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --devices "$bad" --runs 5 --findings "$tmp/f5"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "--devices \"$bad\": not one sentence: $(cat "$tmp/err")"
done
CUDA_VISIBLE_DEVICES= run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --devices all --runs 5 --findings "$tmp/f5"
has "$tmp/err" "no GPU is visible"
# Without CUDA_VISIBLE_DEVICES, the driver's listing or a GPU device file, no device exists.
if [ ! -e /proc/driver/nvidia/gpus ] && [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ] &&
  [ ! -e /dev/dxg ]; then
  (unset CUDA_VISIBLE_DEVICES
    run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --devices 99 --runs 5 --findings "$tmp/f5"
    has "$tmp/err" "no GPU is visible (no NVIDIA driver lists one and no GPU device file exists), so there is no device 99"
    exit $failures) || failures=$((failures + 1))
fi
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --devices 0 --in-process --runs 5 --findings "$tmp/f5"
has "$tmp/err" "cannot go with --in-process"

[ "$failures" -eq 0 ] && echo "devices: all checks passed"
exit $((failures > 0))
