#!/usr/bin/env bash
# The command line refuses what it cannot honour: every option a --help lists is one its parser
# accepts, numbers are strict decimals, contradictory options and bad environment variables are
# one sentence and exit 2, a kernel that cannot start is exit 2 in every command, replay's
# summary stays true when the oracle fails or SIGINT stops it, --oracle-only names no kernel,
# fuzz --kv-dtype keeps every case within its dtype, and JSON output is JSON (docs/cli.md).
#   cli_options_test.sh KVFUZZ SOURCE_DIR [FUZZ_DECODE_CPU_REPLAY]
set -u
kvfuzz=$1
src=$2
harness=${3:-}
# shellcheck source=tests/script_check.sh
. "$(dirname "$0")/script_check.sh"
seed="$src/corpus/seeds/00-seed-h20kv4.kvfz"

# ---- help and parser agree --------------------------------------------------------------------
# Every option of a --help (its option list and its usage lines) is accepted by the parser: a
# valued one without its value is "needs a value", a flag followed by an unknown option lets the
# parser reach that one. And every option in the usage lines is described in the list.
check_help() {
  local help="$tmp/help"
  "$kvfuzz" "$@" --help >"$help" 2>&1 || { fail "$* --help failed"; return; }
  python3 - "$help" >"$tmp/opts" <<'PY' || fail "$* --help: the usage lines name an option the list does not describe"
import re, sys
text = open(sys.argv[1]).read().split("\n")
listed = {}
for line in text:
    # "-o, --output DIR": an option with both spellings lists both
    m = re.match(r"^  (?:(-[A-Za-z0-9]), )?(-[A-Za-z0-9]|--[a-z0-9-]+)(?: (\S+))?(?:\s{2,}|$)", line)
    if m:
        for spelling in (m.group(1), m.group(2)):
            if spelling:
                listed[spelling] = m.group(3) is not None
usage = []
for line in text:
    if not line.strip():
        break
    usage += re.findall(r"(?<![\w-])(--[a-z0-9-]+|-[A-Za-z](?![\w-]))", line)
missing = [o for o in usage if o not in listed]
for o, valued in sorted(listed.items()):
    print(o, "valued" if valued else "flag")
if missing or not listed:
    sys.stderr.write("not listed: %s\n" % missing)
    sys.exit(1)
PY
  while read -r opt kind; do
    case "$opt" in -h | --help) continue ;; esac
    if [ "$kind" = valued ]; then
      "$kvfuzz" "$@" "$opt" >/dev/null 2>"$tmp/err"
      grep -q "needs a value" "$tmp/err" || fail "$* $opt (listed in --help with a value) is not accepted: $(cat "$tmp/err")"
    else
      "$kvfuzz" "$@" "$opt" --zzz-no-such-option >/dev/null 2>"$tmp/err"
      grep -q 'unknown option "--zzz-no-such-option"' "$tmp/err" || fail "$* $opt (a flag in --help) is not accepted: $(cat "$tmp/err")"
    fi
  done <"$tmp/opts"
}
for sub in replay gen show oracle kernels rules bench mutants report fuzz minimize import-fib export-fib; do
  check_help "$sub"
done
check_help bench --oracle
expect 2 'unknown option "--frob"' -- "$kvfuzz" gen --frob
expect 2 "--json takes no value" -- "$kvfuzz" oracle --json=1 "$seed"
expect 2 "-o needs a value" -- "$kvfuzz" gen -o
expect 2 '"--see" is the start of more than one option' -- "$kvfuzz" mutants --see 3

# ---- strict decimal numbers -------------------------------------------------------------------
"$kvfuzz" gen --seed 010 -o "$tmp/s010.kvfz" || fail "gen --seed 010 failed"
"$kvfuzz" gen --seed 10 -o "$tmp/s10.kvfz" || fail "gen --seed 10 failed"
"$kvfuzz" gen --seed 8 -o "$tmp/s8.kvfz" || fail "gen --seed 8 failed"
cmp -s "$tmp/s010.kvfz" "$tmp/s10.kvfz" || fail "--seed 010 is not the seed 10"
cmp -s "$tmp/s010.kvfz" "$tmp/s8.kvfz" && fail "--seed 010 is read as octal 8"
for bad in 0x10 1e3 18446744073709551616 -1 " 5" 5x +5 ""; do
  expect 2 "--seed must be a decimal integer in \[0, 2\^64-1\], got \"" -- "$kvfuzz" gen --seed "$bad" -o "$tmp/x.kvfz"
done
expect 2 '--seed must be a decimal integer in \[0, 2\^64-1\], got "0x10"$' -- "$kvfuzz" gen --seed 0x10 -o "$tmp/x.kvfz"
"$kvfuzz" gen --seed 18446744073709551615 -o "$tmp/max.kvfz" || fail "the largest seed is refused"
expect 2 "--jobs must be a decimal integer in \[1, 1024\], got \"2x\"" -- "$kvfuzz" replay --jobs 2x "$seed"
expect 2 "--jobs must be a decimal integer" -- "$kvfuzz" oracle --jobs " 4" "$seed"
expect 2 "--jobs must be a decimal integer" -- "$kvfuzz" oracle --jobs 99999999999999999999 "$seed"
for bad in nan inf 1e999 -1 0 0x1p3 "1 "; do
  expect 2 "--budget must be a positive number of seconds" -- "$kvfuzz" mutants --budget "$bad"
done
expect 2 "--deadline must be a positive number of seconds" -- "$kvfuzz" replay --deadline inf "$seed"
expect 2 "--heads must be HQ:HK" -- "$kvfuzz" bench --heads " 20:4"
expect 2 "--heads must be HQ:HK" -- "$kvfuzz" bench --heads 20:4x
expect 2 "--max-tries must be a decimal integer" -- "$kvfuzz" minimize --max-tries 1e3 "$seed" -o "$tmp/m.kvfz"

# ---- contradictions ---------------------------------------------------------------------------
expect 2 "give --preset or --random, not both" -- "$kvfuzz" gen --preset page1 --random -o "$tmp/x.kvfz"
expect 2 "give either --preset or --batch/--len, not both" -- "$kvfuzz" bench --preset seed --batch 1 --len 5
expect 2 "--batch and --len go together" -- "$kvfuzz" bench --batch 4
expect 2 "--oracle selects the oracle benchmark and comes first" -- "$kvfuzz" bench --json --oracle
expect 2 "--cases sets the generated cases: not with FILE" -- "$kvfuzz" bench --oracle --cases 5 "$seed"
expect 2 "--seed sets the generated cases: not with FILE" -- "$kvfuzz" bench --oracle --seed 5 "$seed"
# The generated cases are held whole: past the memory budget, refused before any timing.
expect 2 "^kvfuzz bench: --cases 10000000: the cases would hold more than the memory budget of 8.00 MiB after [0-9]+ of them" -- env KVF_MAX_MEMORY_MIB=8 timeout 60 "$kvfuzz" bench --oracle --cases 10000000
expect 2 "--quiet leaves nothing to do" -- "$kvfuzz" report --quiet "$tmp/none.json"
expect 2 "--title names the report page: give -o DIR too" -- "$kvfuzz" report --title T "$tmp/none.json"
expect 2 "--deadline needs a worker process" -- "$kvfuzz" minimize --in-process --deadline 5 "$seed" -o "$tmp/m.kvfz"
expect 2 "a crash finding cannot be minimized --in-process" -- "$kvfuzz" minimize --in-process --class crash "$seed" -o "$tmp/m.kvfz"
# --kv-dtype: a dtype set by name, and FP8 in every case only for a kernel that reads FP8 caches
# (test-planted reads bf16 only); refused before any file is made.
expect 2 '^kvfuzz fuzz: --kv-dtype must be any, bf16, fp8, e4m3 or e5m2, got "fp16"$' -- "$kvfuzz" fuzz --kv-dtype fp16 --runs 1 --findings "$tmp/kvd-none"
for t in fp8 e4m3 e5m2; do
  expect 2 "^kvfuzz fuzz: --kv-dtype $t asks for FP8 caches in every case, but kernel test-planted does not read them" -- \
    "$kvfuzz" fuzz --kernel test-planted --kv-dtype $t --runs 1 --findings "$tmp/kvd-none"
done
[ ! -e "$tmp/kvd-none" ] || fail "a refused --kv-dtype made the findings folder"

# ---- environment variables --------------------------------------------------------------------
expect 2 'KVF_MAX_POOL_GIB must be a decimal integer in \[1, 65536\], got "abc"' -- env KVF_MAX_POOL_GIB=abc "$kvfuzz" show "$seed"
expect 2 'KVF_MAX_POOL_GIB must be a decimal integer' -- env KVF_MAX_POOL_GIB=0 "$kvfuzz" show "$seed"
expect 2 'KVF_MAX_POOL_GIB must be a decimal integer' -- env KVF_MAX_POOL_GIB=010x "$kvfuzz" replay --kernel cpu-ref "$seed"
expect 0 "" -- env KVF_MAX_POOL_GIB=1 "$kvfuzz" show "$seed"
expect 0 "" -- env KVF_MAX_POOL_GIB= "$kvfuzz" show "$seed"
# The limit is applied, not only checked: the pool is measured against the value given.
python3 - "$src/corpus/seeds/00-seed-h20kv4.kvfz" "$tmp/wide.kvfz" <<'PY' || fail "could not craft the wide case"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[8], b[9] = 255, 255                      # Hq = Hk = 255
struct.pack_into("<HH", b, 10, 1024, 1024)  # D 1024, page size 1024: past any limit
open(sys.argv[2], "wb").write(b)
PY
for gib in 1 2; do
  # The memory and work budgets raised out of the way: the pool limit is what refuses this one.
  env KVF_MAX_POOL_GIB=$gib KVF_MAX_MEMORY_MIB=1000000 KVF_MAX_WORK=100000000000000 "$kvfuzz" show "$tmp/wide.kvfz" >/dev/null 2>"$tmp/err"
  grep -q "past the limit of $((gib << 30))$" "$tmp/err" || fail "KVF_MAX_POOL_GIB=$gib is not the pool limit: $(cat "$tmp/err")"
done
expect 2 'KVF_WORKER_TIMING must be 0 or 1, got "yes"' -- env KVF_WORKER_TIMING=yes "$kvfuzz" replay --kernel cpu-ref "$seed"
expect 2 'KVF_CUDA_CHUNK_TILES must be a decimal integer' -- env KVF_CUDA_CHUNK_TILES=abc "$kvfuzz" kernels
expect 2 'KVF_CUDA_STAGE_BYTES must be a decimal integer in \[32, 1073741824\] and a multiple of 16, got "40"' -- env KVF_CUDA_STAGE_BYTES=40 "$kvfuzz" kernels
expect 2 'KVF_CUDA_VERIFY_POOL must be 0 or 1' -- env KVF_CUDA_VERIFY_POOL=on "$kvfuzz" fuzz --runs 1 --findings "$tmp/vp"
expect 2 'KVF_CUDA_HOST_TIMING must be 0 or 1, got "2"' -- env KVF_CUDA_HOST_TIMING=2 "$kvfuzz" replay --kernel cpu-ref "$seed"
if [ -n "$harness" ]; then
  expect 2 'KVF_FUZZ_JOBS must be a decimal integer in \[1, 256\], got "two"' -- env KVF_FUZZ_JOBS=two "$harness" "$seed"
  expect 2 'KVF_FUZZ_KEEP_GOING must be 0 or 1' -- env KVF_FUZZ_KEEP_GOING=yes "$harness" "$seed"
fi

# ---- a precision model that does not parse is one sentence, in every command that judges ------
for sub in replay minimize mutants fuzz export-fib; do
  expect 2 "^kvfuzz $sub: --precision: the precision model 'nonsense' has an unknown component 'nonsense'" -- \
    "$kvfuzz" "$sub" --precision nonsense -o "$tmp/prec-out" "$seed"
done
expect 2 "^kvfuzz replay: --precision: the precision model 'bf16-p\+fp16-p' names P's rounding twice" -- \
  "$kvfuzz" replay --precision bf16-p+fp16-p "$seed"
if [ -n "$harness" ]; then
  expect 2 "^fuzz_decode_cpu: --precision: the precision model 'nonsense'" -- "$harness" --precision=nonsense "$seed"
  expect 2 "^fuzz_decode_cpu: KVF_FUZZ_PRECISION: the precision model 'nonsense'" -- env KVF_FUZZ_PRECISION=nonsense "$harness" "$seed"
  # The target judges each kernel within its declared model: bf16p-acc's rules carry bf16-p-rsum.
  env KVF_FUZZ_KERNEL=cpu-splitkv/mut=bf16p-acc,cpu-splitkv "$harness" --keep-going --rule=strict \
    "$src/corpus/fuzz_decode_cpu/00-seed-shape-49-tokens.kvfz" >/dev/null 2>"$tmp/h.err"
  grep -q "^cpu-splitkv/mut=bf16p-acc: [a-z-]* rule strict:bf16-p-rsum " "$tmp/h.err" && grep -q "^cpu-splitkv: none rule strict " "$tmp/h.err" ||
    fail "the target does not judge each kernel under its own model: $(grep '^cpu' "$tmp/h.err")"
fi

# A named --seeds folder must hold cases: a missing or empty one was a line on stderr at the
# start of a run of minutes without the seed table.
expect 2 "cannot read .*/no-seeds: No such file" -- timeout 20 "$kvfuzz" mutants --seeds "$tmp/no-seeds" --budget 1
mkdir -p "$tmp/empty-seeds"
expect 2 "--seeds .*/empty-seeds holds no .kvfz case" -- timeout 20 "$kvfuzz" mutants --seeds "$tmp/empty-seeds" --budget 1
# A case file is not a folder, and a folder of files that are no case files has no seed either.
expect 2 "--seeds $seed is not a folder" -- timeout 20 "$kvfuzz" mutants --seeds "$seed" --budget 1
mkdir -p "$tmp/junk-seeds" && printf 'not a case' >"$tmp/junk-seeds/a.kvfz"
expect 2 "--seeds .*/junk-seeds holds no .kvfz case kvfuzz can read \(1 unreadable\)" -- timeout 20 "$kvfuzz" mutants --seeds "$tmp/junk-seeds" --budget 1

# ---- an option with one value given twice is refused, not one value dropped -------------------
expect 2 "^kvfuzz gen: --seed is given twice; it takes one value$" -- "$kvfuzz" gen --seed 1 --seed 2 -o "$tmp/twice.kvfz"
[ ! -e "$tmp/twice.kvfz" ] || fail "gen --seed 1 --seed 2 wrote a case"
expect 2 "^kvfuzz replay: --precision is given twice" -- "$kvfuzz" replay --precision f32 --precision ftz "$seed"
expect 2 "^kvfuzz fuzz: --runs is given twice; it takes one value$" -- "$kvfuzz" fuzz --runs 1 --runs 2
# Repeatable ones add: two --rule, two --kernel.
expect 0 "" -- "$kvfuzz" replay --kernel cpu-ref --kernel cpu-splitkv --rule strict --rule fib "$seed"
# A mutant that does not exist is named as one, and PATH.so: names no kernel.
expect 2 "kernel cpu-splitkv has no mutant nope \(" -- "$kvfuzz" replay --kernel cpu-splitkv/mut=nope "$seed"
expect 2 "ends with ':' and names no kernel" -- "$kvfuzz" replay --kernel "$tmp/x.so:" "$seed"

# ---- outputs are regular files: a FIFO or a device in their place is refused, never replaced ----
mkfifo "$tmp/fifo.kvfz"
expect 2 "cannot write .*/fifo.kvfz: it is a FIFO, not a regular file" -- "$kvfuzz" gen --seed 1 -o "$tmp/fifo.kvfz"
[ -p "$tmp/fifo.kvfz" ] || fail "gen -o FIFO replaced the FIFO"
expect 2 "^kvfuzz import-fib: --root is empty" -- "$kvfuzz" import-fib --root "" -o "$tmp/imp" "$tmp/def.json"
mkdir -p "$tmp/a-folder"
expect 2 "cannot write .*/a-folder: it is a directory, not a regular file" -- "$kvfuzz" gen --seed 1 -o "$tmp/a-folder"
# A device node of the test's own (mknod needs root; never the system's /dev/null: a failure
# here would replace it).
if mknod "$tmp/null" c 1 3 2>/dev/null; then
  expect 2 "cannot write .*/null: it is a character device, not a regular file" -- "$kvfuzz" replay --kernel cpu-ref --stats "$tmp/null" "$seed"
  [ -c "$tmp/null" ] || fail "replay --stats DEVICE replaced the device"
fi

# ---- a kernel that cannot start is exit 2 with its reason, in every command -------------------
reason="kernel test-nostart could not start: test-nostart: create\(\) fails on purpose$"
expect 2 "$reason" -- "$kvfuzz" replay --kernel test-nostart "$seed"
expect 2 "$reason" -- timeout 60 "$kvfuzz" mutants --control test-nostart --budget 1
"$kvfuzz" fuzz --kernel test-nostart --runs 3 --findings "$tmp/nostart" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "fuzz with a kernel that cannot start exits $rc, not 2"
grep -q "could not start" "$tmp/err" || fail "fuzz does not say the kernel could not start"
"$kvfuzz" minimize --kernel test-nostart "$seed" -o "$tmp/m.kvfz" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "minimize with a kernel that cannot start exits $rc, not 2"
if "$kvfuzz" kernels | grep -q "CUDA kernels unavailable"; then
  expect 2 "the CUDA kernels cannot start: " -- "$kvfuzz" bench
  expect 2 "--device cuda needs a usable GPU" -- "$kvfuzz" mutants --device cuda
fi

# ---- replay's summary: an oracle failure is counted apart, never as a kernel run ---------------
# One sequence of 131072 tokens at Hq = Hk = 1, D 1: a case of 256 KiB whose MPFR oracle needs
# more than a few tens of MiB, so under a small address-space limit the case loads and the
# oracle alone fails (with an error, before GMP allocates).
python3 - "$tmp/thin.kvfz" <<'PY' || fail "could not craft the thin case"
import struct, sys
b = bytearray(b"KVFZ\x01\x00\x00\x00")
b += struct.pack("<BBHHH", 1, 1, 1, 64, 1)           # Hq, Hk, D, page size, batch
b += bytes([0, 0, 0, 0]) + struct.pack("<IH", 0, 0) + b"\x00\x00"
b += struct.pack("<f", 1.0)
b += bytes([0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0]) + struct.pack("<Q", 1)
b += struct.pack("<HH", 2048, 64)                    # 2048 pages of 64 tokens
open(sys.argv[1], "wb").write(b)
PY
"$kvfuzz" show "$tmp/thin.kvfz" >/dev/null || fail "the thin case does not decode"
seen_oracle_failure=0
for kib in 20000 25000 30000 35000; do
  (ulimit -v $kib; exec "$kvfuzz" replay --kernel cpu-ref --rule strict --jobs 1 --oracle mpfr "$tmp/thin.kvfz") >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if grep -q "1844674407370955\|without a kernel failure, [1-9][0-9]* with one" "$tmp/out" && grep -q "the oracle failed" "$tmp/err"; then
    fail "an oracle failure is counted as a kernel run: $(grep 'case(s)' "$tmp/out")"
  fi
  if grep -q "the oracle failed" "$tmp/err"; then
    seen_oracle_failure=1
    grep -q "^1 case(s), 0 kernel run(s): 0 without a kernel failure, 0 with one, 0 unsupported, 0 bad input(s), 1 not judged (the oracle failed)$" "$tmp/out" \
      || fail "the summary of an oracle failure is wrong: $(grep 'case(s)' "$tmp/out")"
    [ "$rc" -eq 2 ] || fail "a case the oracle cannot judge exits $rc, not 2"
  fi
done
[ "$seen_oracle_failure" -eq 1 ] || echo "note: no address-space limit made the oracle fail; its summary line went unchecked"

# ---- SIGINT on replay: the summary of what was judged, and the statistics written -------------
dirs=()
for i in $(seq 30); do dirs+=("$src/corpus/seeds"); done
"$kvfuzz" replay --kernel cpu-ref --rule strict --stats "$tmp/int.json" "${dirs[@]}" >"$tmp/int.out" 2>"$tmp/int.err" &
pid=$!
for i in $(seq 200); do
  [ "$(grep -c ' cpu-ref ' "$tmp/int.out")" -ge 3 ] && break
  sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || fail "replay stopped by SIGINT exits $rc, not 130 (128 + SIGINT) for passing cases"
nseeds=$(ls "$src"/corpus/seeds/*.kvfz | wc -l)
grep -q "^stopped by Interrupt after [0-9]* of $((30 * nseeds)) case file(s)$" "$tmp/int.out" || fail "replay does not say SIGINT stopped it: $(tail -5 "$tmp/int.out")"
grep -q "^verdict:$" "$tmp/int.out" || fail "replay stopped by SIGINT prints no verdict"
judged=$(grep -c ' cpu-ref  *\(pass\|overflow\|benign\)' "$tmp/int.out")
grep -q "case(s), $judged kernel run(s): $judged without a kernel failure" "$tmp/int.out" || fail "the summary after SIGINT does not count the $judged runs: $(grep 'case(s)' "$tmp/int.out")"
python3 - "$tmp/int.json" "$judged" <<'PY' || fail "the statistics after SIGINT do not hold the runs judged"
import json, sys
d = json.load(open(sys.argv[1]))
ran = d["kernels"][0]["ran"]
assert d["incomplete"] is False and ran == int(sys.argv[2]) and ran < 540, (ran, sys.argv[2])
PY

# ---- options another would silently drop are refused, and so are operands after "--" ----------
expect 2 '^kvfuzz fuzz: --stop-on-finding is --max-findings 1: give one of them$' -- "$kvfuzz" fuzz --kernel cpu-splitkv --runs 1 --stop-on-finding --max-findings 5 --findings "$tmp/cx"
for o in "--kernel cpu-splitkv:kernel" "--rule fib:rule" "--precision bf16-p:precision" "--deadline 3:deadline" "--max-findings 3:max-findings" "--minimize-time 5:minimize-time" "--require-overflow:require-overflow"; do
  # shellcheck disable=SC2086
  expect 2 "^kvfuzz fuzz: --oracle-only runs no kernel and judges nothing: it cannot go with --${o##*:}\$" -- "$kvfuzz" fuzz --oracle-only --runs 1 ${o%%:*} --findings "$tmp/cx"
done
expect 2 'it cannot go with --deadline$' -- "$kvfuzz" fuzz --kernel cpu-splitkv --runs 1 --in-process --deadline 5 --findings "$tmp/cx"
expect 2 'it cannot go with --workers$' -- "$kvfuzz" fuzz --kernel cpu-splitkv --runs 1 --in-process --workers 3 --findings "$tmp/cx"
expect 2 '^kvfuzz fuzz: unexpected argument "foo"' -- "$kvfuzz" fuzz --kernel cpu-splitkv --runs 1 --findings "$tmp/cx" -- foo
expect 2 '^kvfuzz fuzz: --precision is empty' -- "$kvfuzz" fuzz --kernel cpu-splitkv --runs 1 --precision "" --findings "$tmp/cx"
[ ! -e "$tmp/cx" ] || fail "a refused fuzz made its findings folder"
# More lanes than the kernel runs at once: refused when the worker starts, not clamped.
"$kvfuzz" fuzz --kernel cpu-splitkv --runs 1 --seed 1 --lanes 64 --findings "$tmp/lanes64" >/dev/null 2>"$tmp/lanes64.err"
rc=$?
[ "$rc" -eq 2 ] || fail "fuzz --lanes 64 on cpu-splitkv exited $rc, expected 2"
grep -q 'could not start: --lanes 64 is more than the 8 state(s) kernel cpu-splitkv runs at once' "$tmp/lanes64.err" ||
  fail "fuzz --lanes 64 does not say the kernel runs 8 states at once: $(cat "$tmp/lanes64.err")"

# ---- --oracle-only claims no kernel -----------------------------------------------------------
"$kvfuzz" fuzz --oracle-only --runs 20 --seed 1 --findings "$tmp/oo" >"$tmp/oo.out" 2>"$tmp/oo.err" || fail "fuzz --oracle-only failed"
grep -q "oracle only (no kernel, nothing judged)" "$tmp/oo.out" || fail "the --oracle-only summary does not say it ran no kernel"
if grep -q "kernel cpu\|worst margin" "$tmp/oo.out"; then fail "the --oracle-only summary names a kernel or a margin: $(cat "$tmp/oo.out")"; fi
# Its progress lines (every 5 s) show no findings or margins either: nothing is judged.
"$kvfuzz" fuzz --oracle-only --time 6 --seed 1 --findings "$tmp/oo6" >/dev/null 2>"$tmp/oo6.err" || fail "fuzz --oracle-only --time 6 failed"
grep -Eq "kvfuzz fuzz: +[0-9]+s  cases [0-9]+ \([0-9.]+/s\)  tokens .*  corpus [0-9]+$" "$tmp/oo6.err" || fail "fuzz --oracle-only printed no progress line: $(cat "$tmp/oo6.err")"
grep -q "^kvfuzz fuzz: oracle only (no kernel, nothing judged), seed 1" "$tmp/oo6.err" || fail "fuzz --oracle-only does not open by saying it runs no kernel: $(head -1 "$tmp/oo6.err")"
if grep -q "worst margin\|findings\|kernel cpu" "$tmp/oo6.err"; then fail "the --oracle-only progress line shows findings or margins: $(cat "$tmp/oo6.err")"; fi

# ---- --kv-dtype e5m2: every case judged has e5m2 K and V caches ---------------------------------
# Two bf16 seeds in the initial corpus take the dtype too; the summary counts the FP8 cases among
# those judged, and every case the campaign added to the corpus holds e5m2 caches.
mkdir -p "$tmp/kvd-corpus"
cp "$src/corpus/seeds/01-mixed-lengths.kvfz" "$src/corpus/seeds/06-gqa7.kvfz" "$tmp/kvd-corpus/"
"$kvfuzz" fuzz --kernel cpu-splitkv --kv-dtype e5m2 --runs 50 --seed 5 --jobs 2 --minimize-time 0 \
  --findings "$tmp/kvd" --corpus "$tmp/kvd-corpus" >"$tmp/kvd.out" 2>"$tmp/kvd.err"
rc=$?
[ "$rc" -le 1 ] || fail "fuzz --kv-dtype e5m2 exited $rc: $(tail -3 "$tmp/kvd.err")"
grep -q "^kvfuzz fuzz: kernel cpu-splitkv, seed 5, rules .*, kv caches e5m2," "$tmp/kvd.err" ||
  fail "the start line does not name the dtype: $(head -1 "$tmp/kvd.err")"
judged=$(sed -n 's/^  cases [0-9]* ([0-9.]*\/s), judged \([0-9]*\),.*/\1/p' "$tmp/kvd.out")
fp8=$(sed -n 's/^  kv caches: \([0-9]*\) of the judged cases had FP8 caches (--kv-dtype e5m2)$/\1/p' "$tmp/kvd.out")
[ -n "$judged" ] && [ "$judged" -gt 0 ] && [ "$fp8" = "$judged" ] ||
  fail "--kv-dtype e5m2 judged ${judged:-?} cases, ${fp8:-?} of them FP8: $(grep -E 'judged|kv caches' "$tmp/kvd.out")"
added=0
for f in "$tmp/kvd-corpus"/*.kvfz; do
  case "$(basename "$f")" in 01-mixed-lengths.kvfz | 06-gqa7.kvfz) continue ;; esac
  added=$((added + 1))
  "$kvfuzz" show "$f" >"$tmp/kvd.json" || { fail "show $f failed"; continue; }
  grep -q '"k_dtype": "e5m2"' "$tmp/kvd.json" && grep -q '"v_dtype": "e5m2"' "$tmp/kvd.json" ||
    fail "corpus case $(basename "$f") of --kv-dtype e5m2 has other caches: $(grep -E '"text"|dtype' "$tmp/kvd.json" | head -3)"
done
[ "$added" -gt 0 ] || fail "the --kv-dtype e5m2 campaign added no case to its corpus"

# ---- JSON is JSON ------------------------------------------------------------------------------
strict_json() { # FILE: parses with no bare NaN/Infinity and prints nothing
  python3 -c '
import json, sys
def bare(name): raise ValueError("bare " + name)
json.load(open(sys.argv[1]), parse_constant=bare)' "$1"
}
"$kvfuzz" show "$seed" >"$tmp/show.json" && strict_json "$tmp/show.json" || fail "show prints invalid JSON"
python3 -m json.tool "$tmp/show.json" >/dev/null || fail "show's JSON does not pass json.tool"
"$kvfuzz" show --full "$src/corpus/seeds/02-empty-sequences.kvfz" >"$tmp/full.json" && strict_json "$tmp/full.json" || fail "show --full prints invalid JSON"
[ "$(wc -l <"$tmp/full.json")" -eq 1 ] || fail "show --full is not one line"
# A recipe seed past 2^63 is still written as a JSON number.
"$kvfuzz" show "$tmp/max.kvfz" >"$tmp/max.json" && strict_json "$tmp/max.json" || fail "show of the largest seed prints invalid JSON"
# A summary of no value has null for min, max and the means, not a number standing for none.
python3 - "$seed" "$tmp/nothing.kvfz" <<'PY' || fail "could not craft the empty case"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<HH", b, 52, 0, 0)  # its one sequence empty
struct.pack_into("<H", b, 24, 1)      # one spare page, so the pool is not empty
open(sys.argv[2], "wb").write(b)
PY
"$kvfuzz" show "$tmp/nothing.kvfz" >"$tmp/nothing.json" && strict_json "$tmp/nothing.json" || fail "show of an empty case prints invalid JSON"
python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))["values"]["k_used"]
assert v["count"] == 0 and v["min"] is None and v["max"] is None and v["mean"] is None, v' "$tmp/nothing.json" || fail "an empty summary prints numbers: $(cat "$tmp/nothing.json")"

finish cli_options
