#!/usr/bin/env bash
# A sweep of hostile inputs over every command: each probe states the exit status it expects;
# a probe is flagged when it hangs (124/137), dies by a signal, exits otherwise, prints an
# error that is not one line (or none), or grows past 1.5 GiB. Rerunnable:
#   scripts/hostile_sweep.sh build/cli/kvfuzz [filter]
# (VLIMIT=unlimited TMO=60 for an ASan build: its shadow memory needs the address space, and
# its slower runs more than the default 20 s per probe.)
set -u
K=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
filter=${2:-}
src=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
seed=$src/corpus/seeds/00-seed-h20kv4.kvfz
small=$src/corpus/seeds/08-page1.kvfz
bad=0 n=0

# probe EXPECTED LABEL -- command...: EXPECTED is an exit status, x (any status, but a status 2
# must come with one line) or d (a design choice, noted: only a hang or a crash is flagged).
probe() {
  local exp=$1 label=$2
  shift 3
  [ -n "$filter" ] && [[ "$label" != *$filter* ]] && return
  n=$((n + 1))
  (ulimit -v "${VLIMIT:-6000000}"; exec timeout -k 2 "${TMO:-20}" /usr/bin/time -f '%M %e' -o "$T/.time" "$@") \
    >"$T/.out" 2>"$T/.err" </dev/null
  local rc=$? rss secs lines why=""
  read -r rss secs < <(tail -1 "$T/.time" 2>/dev/null) || true
  lines=$(wc -l <"$T/.err")
  case $rc in 124 | 137) why="HANG" ;; esac
  [ -z "$why" ] && [ "$rc" -gt 2 ] && why="CRASH($rc)"
  [ -z "$why" ] && [ "$rc" != "$exp" ] && [ "$exp" != "x" ] && [ "$exp" != d ] && why="RC $rc != $exp"
  [ -z "$why" ] && [ "$rc" -eq 2 ] && [ "$lines" -ne 1 ] && [ "$exp" != d ] && why="STDERR $lines lines"
  [ -z "$why" ] && [ "${rss:-0}" -gt 1572864 ] 2>/dev/null && why="RSS ${rss}k"
  if [ -n "$why" ]; then
    bad=$((bad + 1))
    printf 'BAD  %-14s %-60s rc=%s rss=%sk t=%ss\n' "$why" "$label" "$rc" "${rss:-?}" "${secs:-?}"
    head -c 600 "$T/.err" | sed 's/^/       | /'
  else
    printf 'ok   %-60s rc=%s rss=%sk t=%ss  %s\n' "$label" "$rc" "${rss:-?}" "${secs:-?}" \
      "$(head -c 150 "$T/.err" | head -1)"
  fi
}

# ---- hostile files --------------------------------------------------------------------------
: >"$T/empty.kvfz"
head -c 40 "$seed" >"$T/trunc.kvfz"
mkdir "$T/dir.kvfz"
mkfifo "$T/fifo.kvfz"
truncate -s 3G "$T/sparse.kvfz"
cp "$seed" "$T/unreadable.kvfz" && chmod 000 "$T/unreadable.kvfz"
nl="$T/new
line.kvfz"
cp "$seed" "$nl"
ln -s "$T/nowhere" "$T/dangling.kvfz"
ln -s /dev/zero "$T/zero.kvfz"
head -c 100000 /dev/urandom >"$T/random.kvfz"
mkdir "$T/casedir" && cp "$small" "$T/casedir/a.kvfz" && mkfifo "$T/casedir/b.kvfz"
mkdir "$T/casedir2" && cp "$small" "$T/casedir2/a.kvfz" && mkdir "$T/casedir2/sub.kvfz"
for f in empty trunc dir fifo sparse unreadable dangling zero random; do
  exp=2
  [ "$f" = unreadable ] && [ "$(id -u)" -eq 0 ] && exp=0 # root reads it anyway
  for c in show replay oracle; do
    probe $exp "$c $f.kvfz" -- "$K" $c "$T/$f.kvfz"
  done
done
probe 2 "show /dev/zero" -- "$K" show /dev/zero
probe 2 "show /dev/stdin (fifo)" -- "$K" show /dev/stdin
probe 0 "show newline-path" -- "$K" show "$nl"
probe 2 "show newline-path missing" -- "$K" show "$T/no
such.kvfz"
probe 2 "replay dir with fifo" -- "$K" replay --kernel cpu-ref "$T/casedir"
probe 2 "replay dir with subdir.kvfz" -- "$K" replay --kernel cpu-ref "$T/casedir2"
probe 2 "export-fib fifo" -- "$K" export-fib --kernel cpu-ref -o "$T/ex-fifo" "$T/fifo.kvfz"
probe 2 "minimize fifo" -- "$K" minimize --kernel cpu-ref -o "$T/m.kvfz" "$T/fifo.kvfz"
probe 2 "fuzz --corpus a file" -- "$K" fuzz --kernel cpu-ref --runs 1 --corpus "$seed" --findings "$T/f1"
probe 0 "fuzz --corpus dir w/ fifo (skipped, said)" -- "$K" fuzz --kernel cpu-ref --runs 3 --corpus "$T/casedir" --findings "$T/f2"

# ---- option values --------------------------------------------------------------------------
# Values no option takes; then the integers' own refusals (+5, 1e3 are valid seconds) and 0
# where the quantity must be positive.
ints="+5 1e3"
for v in -1 nan inf 1e999 99999999999999999999 '' ' 5' 5x 0x10 $ints 0; do
  int_only=0; case " $ints " in *" $v "*) int_only=1 ;; esac
  if [ "$int_only" = 0 ]; then
    probe 2 "fuzz --time '$v'" -- "$K" fuzz --kernel cpu-ref --time "$v" --findings "$T/fz"
    probe 2 "replay --deadline '$v'" -- "$K" replay --kernel cpu-ref --deadline "$v" "$small"
    probe 2 "mutants --budget '$v'" -- "$K" mutants --budget "$v"
    probe 2 "fuzz --stats-interval '$v'" -- "$K" fuzz --kernel cpu-ref --runs 1 --stats-interval "$v" --findings "$T/fz"
    probe 2 "export-fib --deadline '$v'" -- "$K" export-fib --deadline "$v" -o "$T/e" "$small"
  fi
  probe 2 "fuzz --runs '$v'" -- "$K" fuzz --kernel cpu-ref --runs "$v" --findings "$T/fz"
  probe 2 "fuzz --jobs '$v'" -- "$K" fuzz --kernel cpu-ref --runs 1 --jobs "$v" --findings "$T/fz"
  probe 2 "replay --jobs '$v'" -- "$K" replay --kernel cpu-ref --jobs "$v" "$small"
  probe 2 "fuzz --max-batch '$v'" -- "$K" fuzz --kernel cpu-ref --runs 1 --max-batch "$v" --findings "$T/fz"
  probe 2 "fuzz --workers '$v'" -- "$K" fuzz --kernel cpu-ref --runs 1 --workers "$v" --findings "$T/fz"
  probe 2 "fuzz --lanes '$v'" -- "$K" fuzz --kernel cpu-ref --runs 1 --lanes "$v" --findings "$T/fz"
  probe 2 "bench --iters '$v'" -- "$K" bench --iters "$v"
  probe 2 "minimize --max-tries '$v'" -- "$K" minimize --kernel cpu-ref --max-tries "$v" -o "$T/m.kvfz" "$small"
  [ "$v" = 0 ] && continue # a valid seed and share
  probe 2 "gen --seed '$v'" -- "$K" gen --seed "$v" -o "$T/g.kvfz"
  probe 2 "import-fib --seed '$v'" -- "$K" import-fib --seed "$v" -o "$T/i" "$T"
  probe 2 "fuzz --large-share '$v'" -- "$K" fuzz --kernel cpu-ref --runs 1 --large-share "$v" --findings "$T/fz"
done
probe 2 "fuzz --large-share 101" -- "$K" fuzz --kernel cpu-ref --runs 1 --large-share 101 --findings "$T/fz"
probe 2 "fuzz --devices bogus" -- "$K" fuzz --kernel cpu-ref --runs 1 --devices bogus --findings "$T/fz"
probe 2 "fuzz --devices ''" -- "$K" fuzz --kernel cpu-ref --runs 1 --devices "" --findings "$T/fz"
probe 2 "fuzz --devices 0,0" -- "$K" fuzz --kernel cpu-ref --runs 1 --devices 0,0 --findings "$T/fz"
probe 2 "fuzz --devices -1" -- "$K" fuzz --kernel cpu-ref --runs 1 --devices -1 --findings "$T/fz"
probe 2 "fuzz --devices 99999999999999999999" -- "$K" fuzz --kernel cpu-ref --runs 1 --devices 99999999999999999999 --findings "$T/fz"
probe 2 "fuzz --time and --runs" -- "$K" fuzz --kernel cpu-ref --runs 1 --time 1 --findings "$T/fz"
probe d "fuzz --runs twice (the last wins)" -- "$K" fuzz --kernel cpu-ref --runs 1 --runs 2 --findings "$T/fz"
probe 2 "fuzz --kernel missing" -- "$K" fuzz --kernel nope --runs 1 --findings "$T/fz"
probe 2 "fuzz --kernel ''" -- "$K" fuzz --kernel "" --runs 1 --findings "$T/fz"
probe 2 "fuzz --findings a file" -- "$K" fuzz --kernel cpu-ref --runs 1 --findings "$seed"
probe 2 "fuzz --findings ''" -- "$K" fuzz --kernel cpu-ref --runs 1 --findings ""
probe 2 "fuzz --stats ''" -- "$K" fuzz --kernel cpu-ref --runs 1 --stats "" --findings "$T/fz"
probe 2 "fuzz --stats a dir" -- "$K" fuzz --kernel cpu-ref --runs 1 --stats "$T/casedir" --findings "$T/fz"
probe 2 "fuzz --max-work 1" -- "$K" fuzz --kernel cpu-ref --runs 1 --max-work 1 --findings "$T/fz"
probe 2 "fuzz --rule bogus" -- "$K" fuzz --kernel cpu-ref --runs 1 --rule bogus --findings "$T/fz"
probe 2 "fuzz operand" -- "$K" fuzz --kernel cpu-ref --runs 1 extra --findings "$T/fz"
probe 2 "replay --rule ''" -- "$K" replay --kernel cpu-ref --rule "" "$small"
probe 2 "replay --rule strict:bogus" -- "$K" replay --kernel cpu-ref --rule "strict:x=1" "$small"
probe 2 "replay --oracle bogus" -- "$K" replay --kernel cpu-ref --oracle bogus "$small"
probe 2 "replay no files" -- "$K" replay --kernel cpu-ref
probe 2 "replay --stats dir" -- "$K" replay --kernel cpu-ref --stats "$T/casedir" "$small"
probe 2 "replay --kernel broken.so" -- "$K" replay --kernel "$T/random.kvfz" "$small"
probe 2 "replay --kernel /dev/null.so" -- "$K" replay --kernel /dev/null "$small"
cp "$T/random.kvfz" "$T/broken.so"
probe 2 "replay --kernel broken.so (ext)" -- "$K" replay --kernel "$T/broken.so" "$small"
printf 'int x;\n' | cc -shared -fPIC -x c - -o "$T/nosym.so" 2>/dev/null
probe 2 "replay --kernel nosym.so" -- "$K" replay --kernel "$T/nosym.so" "$small"
probe 2 "replay --kernel python:nomod:f" -- "$K" replay --kernel python:nomod:f "$small"
echo '{' >"$T/sol.json"
probe 2 "replay --kernel bad solution.json" -- "$K" replay --kernel "$T/sol.json" "$small"
probe 2 "gen --preset bogus" -- "$K" gen --preset bogus -o "$T/g.kvfz"
probe 2 "gen -o dir" -- "$K" gen -o "$T/casedir"
probe 2 "gen -o nodir/x" -- "$K" gen -o "$T/nodir/x.kvfz"
probe 2 "gen -o ''" -- "$K" gen -o ""
probe 2 "gen no -o" -- "$K" gen
probe 2 "show two files" -- "$K" show "$small" "$small"
probe 2 "show nothing" -- "$K" show
probe 2 "oracle --jobs 0" -- "$K" oracle --jobs 0 "$small"
probe 2 "oracle --jobs 100000" -- "$K" oracle --jobs 100000 "$small"
probe 2 "kernels --kernel missing" -- "$K" kernels --kernel nope
probe 2 "rules extra" -- "$K" rules extra
probe 2 "mutants --device bogus" -- "$K" mutants --device bogus
probe 2 "mutants --seeds missing" -- "$K" mutants --seeds "$T/nope" --budget 1
probe 2 "mutants --seeds empty dir" -- "$K" mutants --seeds "$T/emptydir" --budget 1
probe 2 "bench --len -1" -- "$K" bench --batch 1 --len -1
probe 2 "bench --heads 3" -- "$K" bench --heads 3
probe 2 "bench --heads 7:3" -- "$K" bench --heads 7:3
probe 2 "bench --heads 0:0" -- "$K" bench --heads 0:0
probe 2 "bench --heads 4:2:1" -- "$K" bench --heads 4:2:1
probe 2 "bench --head-dim 100" -- "$K" bench --head-dim 100
probe 2 "bench --oracle --cases -1" -- "$K" bench --oracle --cases -1
probe 2 "minimize no -o" -- "$K" minimize --kernel cpu-ref "$small"
probe 2 "minimize --class bogus" -- "$K" minimize --kernel cpu-ref --class bogus -o "$T/m.kvfz" "$small"
probe 2 "minimize passing case" -- "$K" minimize --kernel cpu-ref -o "$T/m.kvfz" "$small"
probe 2 "minimize --time 0" -- "$K" minimize --kernel cpu-ref --time 0 -o "$T/m.kvfz" "$small"
for c in replay gen show oracle kernels rules mutants bench fuzz minimize report import-fib export-fib; do
  probe 2 "$c --bogus" -- "$K" $c --bogus
  probe 2 "$c -Z" -- "$K" $c -Z
  probe 0 "$c --help" -- "$K" $c --help
  probe 2 "$c --help=x" -- "$K" $c --help=x
done
probe d "no command (usage on stderr)" -- "$K"
probe 2 "unknown command" -- "$K" frob
probe 2 "command ''" -- "$K" ""

# ---- environment ----------------------------------------------------------------------------
for var in KVF_MAX_MEMORY_MIB KVF_MAX_WORK KVF_MAX_POOL_GIB KVF_WORKER_TIMING KVF_CUDA_STAGE_BYTES \
  KVF_CUDA_CHUNK_TILES KVF_CUDA_VERIFY_POOL KVF_FUZZ_JOBS; do
  case $var in KVF_WORKER_TIMING | KVF_CUDA_VERIFY_POOL) values="abc -1 2" ;; *) values="abc -1 0" ;; esac
  for v in $values 99999999999999999999999 5x ' 5'; do
    probe 2 "$var='$v' kernels" -- env "$var=$v" "$K" kernels
    probe 2 "$var='$v' show" -- env "$var=$v" "$K" show "$small"
    probe 2 "$var='$v' report" -- env "$var=$v" "$K" report "$T/none.json"
  done
  probe 0 "$var='' show (empty is default)" -- env "$var=" "$K" show "$small"
done
probe 2 "KVF_PYTHON=/nonexistent python kernel" -- env KVF_PYTHON=/nonexistent "$K" replay --kernel python:m:f "$small"
probe 2 "KVF_PYTHON_WORKER=/dev/null" -- env KVF_PYTHON_WORKER=/dev/null "$K" replay --kernel python:m:f "$small"

# ---- report: stats files ---------------------------------------------------------------------
"$K" replay --kernel cpu-ref --stats "$T/good.json" "$small" >/dev/null 2>&1
mkdir "$T/emptydir" "$T/statsdir"
echo 'garbage' >"$T/garbage.json"
echo '[]' >"$T/array.json"
echo '{"format": "kvfuzz-stats", "version": "2"}' >"$T/vstr.json"
echo '{"format": "kvfuzz-stats", "version": 99999999999999999999999}' >"$T/vhuge.json"
python3 - "$T/good.json" "$T" <<'PY'
import json, sys, os
g = json.load(open(sys.argv[1])); T = sys.argv[2]
def mut(name, f):
    d = json.loads(json.dumps(g)); f(d); open(os.path.join(T, name), "w").write(json.dumps(d))
def setpath(d, path, v):
    for k in path[:-1]: d = d[k]
    d[path[-1]] = v
mut("nan.json", lambda d: setpath(d, ["groups", 0, "o", "elements"], "NaN"))
mut("neg.json", lambda d: setpath(d, ["groups", 0, "o", "elements"], -5))
mut("huge.json", lambda d: setpath(d, ["groups", 0, "o", "elements"], 1e300))
mut("hugeint.json", lambda d: setpath(d, ["groups", 0, "o", "elements"], 9223372036854775807))
mut("bpo.json", lambda d: setpath(d, ["buckets_per_octave"], 1000000000))
mut("bpo0.json", lambda d: setpath(d, ["buckets_per_octave"], 0))
mut("worst.json", lambda d: setpath(d, ["worst_n"], 1000000000000))
mut("kernels-str.json", lambda d: setpath(d, ["kernels"], "x"))
mut("groups-obj.json", lambda d: setpath(d, ["groups"], {}))
mut("cases-null.json", lambda d: setpath(d, ["cases"], None))
mut("nokeys.json", lambda d: [d.pop(k) for k in list(d) if k not in ("format", "version")])
mut("hist-str.json", lambda d: setpath(d, ["groups", 0, "o", "hist"], "x"))
def bighist(d):
    h = d["groups"][0]["o"]["hist"]
    for k, v in h.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                if isinstance(vv, list): v[kk] = vv + [1] * 2000000; return
mut("bighist.json", bighist)
def negidx(d):
    h = d["groups"][0]["o"]["hist"]
    for k, v in h.items():
        if isinstance(v, dict) and "first" in v: v["first"] = -10**15; return
        if isinstance(v, dict):
            for kk in v:
                if "first" in kk or "lo" in kk or "min" in kk: v[kk] = -10**15; return
mut("negidx.json", negidx)
def dupgroup(d): d["groups"].append(d["groups"][0])
mut("dupgroup.json", dupgroup)
def badkernel(d): d["groups"][0]["kernel"] = 7
mut("badkernel.json", badkernel)
def nl_label(d): d["label"] = "a\nb"
mut("nl-label.json", nl_label)
PY
for f in garbage array vstr vhuge nan neg huge hugeint bpo bpo0 worst kernels-str groups-obj \
  cases-null nokeys hist-str bighist negidx dupgroup badkernel nl-label; do
  probe x "report $f.json" -- "$K" report "$T/$f.json"
  probe x "report merge good+$f.json" -- "$K" report --merge "$T/m-$f.json" "$T/good.json" "$T/$f.json"
done
probe 2 "report empty dir" -- "$K" report "$T/emptydir"
mkdir "$T/statsdir/stats-x.json"
probe 2 "report dir with a dir stats" -- "$K" report "$T/statsdir"
rmdir "$T/statsdir/stats-x.json"
mkfifo "$T/statsdir/stats-f.json"
probe 2 "report dir with a fifo stats" -- "$K" report "$T/statsdir"
rm "$T/statsdir/stats-f.json"
echo garbage >"$T/statsdir/stats-g.json"
probe 2 "report dir with garbage stats" -- "$K" report "$T/statsdir"
rm "$T/statsdir/stats-g.json"
mkdir "$T/many"
for i in $(seq 1 3000); do cp "$T/good.json" "$T/many/stats-$i.json"; done
probe 0 "report dir of 3000 stats" -- "$K" report --quiet --merge "$T/many.json" "$T/many"
probe 2 "report fifo" -- "$K" report "$T/fifo.kvfz"
probe 2 "report /dev/zero" -- "$K" report /dev/zero
probe 2 "report sparse" -- "$K" report "$T/sparse.kvfz"
probe 2 "report -o a file" -- "$K" report -o "$T/good.json" "$T/good.json"
probe 2 "report --merge into dir" -- "$K" report --merge "$T/emptydir" "$T/good.json"
probe 2 "report --merge nodir" -- "$K" report --merge "$T/nodir/m.json" "$T/good.json"
probe 2 "report LABEL= empty path" -- "$K" report "lab="
probe 2 "report =path (no label: a path)" -- "$K" report "=$T/good.json"

# ---- FlashInfer-Bench interop ----------------------------------------------------------------
G=$T/fib
python3 "$src/tests/fib_golden.py" make "$G" "$src/fib/definitions/gqa_paged/gqa_paged_decode_h20_kv4_d128_ps64.json"
python3 - "$G" <<'PY'
import json, os, sys, shutil
G = sys.argv[1]; good = G + "/good"; D = "gqa_paged_decode_h4_kv2_d8_ps4"
dfn = json.load(open(good + "/definitions/gqa_paged/%s.json" % D))
lines = [json.loads(l) for l in open(good + "/workloads/gqa_paged/%s.jsonl" % D) if l.strip()]
H = G + "/h"; os.makedirs(H)
def case(name, d=None, wl=None, raw_def=None, raw_wl=None):
    c = H + "/" + name; os.makedirs(c)
    shutil.copytree(good + "/blob", c + "/blob")
    open(c + "/def.json", "w").write(raw_def if raw_def is not None else json.dumps(d if d is not None else dfn))
    if raw_wl is None:
        raw_wl = "\n".join(json.dumps(l) for l in (wl if wl is not None else lines[:1])) + "\n"
    open(c + "/wl.jsonl", "wb").write(raw_wl if isinstance(raw_wl, bytes) else raw_wl.encode())
def dmut(f):
    d = json.loads(json.dumps(dfn)); f(d); return d
def wmut(f, i=0):
    l = json.loads(json.dumps(lines[i])); f(l); return [l]
def ax(name, v): return lambda d: d["axes"].__setitem__(name, {"type": "const", "value": v})
case("def-empty", raw_def="")
case("def-garbage", raw_def="{{{")
case("def-array", raw_def="[]")
case("def-deep", raw_def="[" * 100000 + "]" * 100000)
case("def-nul", raw_def='{"name": "a\\u0000b"}')
case("def-hq0", dmut(ax("num_qo_heads", 0)))
case("def-hq5-hk2", dmut(ax("num_qo_heads", 5)))
case("def-hk0", dmut(ax("num_kv_heads", 0)))
case("def-hk-gt-hq", dmut(ax("num_kv_heads", 8)))
case("def-d65535", dmut(ax("head_dim", 65535)))
case("def-s65535", dmut(ax("page_size", 65535)))
case("def-s-float", dmut(ax("page_size", 4.0)))
case("def-s-huge", dmut(ax("page_size", 10**30)))
case("def-s-bool", dmut(ax("page_size", True)))
case("def-name-long", dmut(lambda d: d.__setitem__("name", "gqa_paged_decode_" + "x" * 300)))
case("def-name-slash", dmut(lambda d: d.__setitem__("name", "gqa_paged_decode/../x")))
case("def-name-num", dmut(lambda d: d.__setitem__("name", 5)))
case("def-inputs-list", dmut(lambda d: d.__setitem__("inputs", [])))
case("def-q-shape-num", dmut(lambda d: d["inputs"]["q"].__setitem__("shape", [1, 2, 3])))
case("def-scale-shape", dmut(lambda d: d["inputs"]["sm_scale"].__setitem__("shape", ["batch_size"])))
case("wl-empty", raw_wl="")
case("wl-blank", raw_wl="\n\n  \n\r\n")
case("wl-garbage", raw_wl="not json\n")
case("wl-nul", raw_wl=b'{"uuid": "a"}\x00\n')
case("wl-array", raw_wl="[1,2]\n")
case("wl-crlf", raw_wl=json.dumps(lines[0]) + "\r\n")
case("wl-two-on-a-line", raw_wl=json.dumps(lines[0]) + " " + json.dumps(lines[1]) + "\n")
case("wl-nl-in-uuid", wl=wmut(lambda l: l["workload"].__setitem__("uuid", "a\nb")))
case("wl-uuid-dotdot", wl=wmut(lambda l: l["workload"].__setitem__("uuid", "..")))
case("wl-batch-huge", wl=wmut(lambda l: l["workload"]["axes"].update(batch_size=2**63 - 1, len_indptr=2**63 - 1)))
case("wl-batch-huge2", wl=wmut(lambda l: l["workload"]["axes"].update(batch_size=2**63 - 1)))
case("wl-batch0", wl=wmut(lambda l: l["workload"]["axes"].update(batch_size=0, len_indptr=1)))
case("wl-pages-huge", wl=wmut(lambda l: l["workload"]["axes"].update(num_pages=2**62)))
case("wl-entries-huge", wl=wmut(lambda l: l["workload"]["axes"].update(num_kv_indices=2**62)))
case("wl-axis-float", wl=wmut(lambda l: l["workload"]["axes"].update(num_pages=6.0)))
case("wl-axis-neg", wl=wmut(lambda l: l["workload"]["axes"].update(num_pages=-1)))
case("wl-axes-missing", wl=wmut(lambda l: l["workload"].pop("axes")))
case("wl-type-num", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("type", 5)))
case("wl-input-str", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("q", "random")))
case("wl-extra-input", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("bias", {"type": "random"})))
case("wl-path-abs-zero", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("path", "/dev/zero")))
case("wl-path-dir", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("path", "blob")))
case("wl-path-missing", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("path", "nope.safetensors")))
case("wl-path-nl", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("path", "no\npe.safetensors")))
case("wl-path-long", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("path", "a/" * 3000)))
case("wl-path-num", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("path", 7)))
case("wl-key-missing", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("tensor_key", "nope")))
case("wl-key-nl", wl=wmut(lambda l: l["workload"]["inputs"]["q"].__setitem__("tensor_key", "a\nb")))
case("wl-scale-nan", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("sm_scale", {"type": "scalar", "value": "NaN"})))
case("wl-scale-huge", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("sm_scale", {"type": "scalar", "value": 1e39})))
case("wl-scale-tiny", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("sm_scale", {"type": "scalar", "value": 1e-60})))
case("wl-scale-neg", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("sm_scale", {"type": "scalar", "value": -1.0})))
case("wl-scale-random", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("sm_scale", {"type": "random"})))
case("wl-scale-int", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("sm_scale", {"type": "scalar", "value": 1})))
case("wl-q-scalar", wl=wmut(lambda l: l["workload"]["inputs"].__setitem__("q", {"type": "scalar", "value": 1})))
case("wl-other-def", wl=wmut(lambda l: l.__setitem__("definition", "gqa_paged_decode_other")))
case("wl-def-num", wl=wmut(lambda l: l.__setitem__("definition", 3)))
case("wl-workload-str", wl=wmut(lambda l: l.__setitem__("workload", "x")))
case("wl-dup-uuid", wl=lines[:1] * 2)
# A large random pool: memory and time of the import under a small memory budget.
big = json.loads(json.dumps(lines[2]))
big["workload"]["uuid"] = "big"
big["workload"]["axes"]["num_pages"] = 30000000
case("wl-big-random-pool", wl=[big])
# Many lines: one file of 2000 copies under distinct uuids (time).
many = []
for i in range(2000):
    l = json.loads(json.dumps(lines[2])); l["workload"]["uuid"] = "m%d" % i; many.append(l)
case("wl-many", wl=many)
# Bad blob headers.
def blobcase(name, raw):
    case(name, wl=[lines[0]])
    p = H + "/" + name + "/" + lines[0]["workload"]["inputs"]["q"]["path"]
    open(p, "wb").write(raw)
import struct
blobcase("st-empty", b"")
blobcase("st-7bytes", b"\x01" * 7)
blobcase("st-hdr-huge", struct.pack("<Q", 2**63) + b"{}")
blobcase("st-hdr-past", struct.pack("<Q", 1000) + b"{}")
blobcase("st-hdr-notjson", struct.pack("<Q", 4) + b"abcd")
blobcase("st-hdr-array", struct.pack("<Q", 2) + b"[]")
blobcase("st-hdr-nl", struct.pack("<Q", 20) + b'{"a\\nb": {"x": 1}}  ')
blobcase("st-shape-huge", struct.pack("<Q", 64) + b'{"q":{"dtype":"BF16","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'[:64].ljust(64))
PY
FH=$G/h
for c in "$FH"/*/; do
  c=${c%/}; name=$(basename "$c")
  exp=2
  case $name in wl-crlf | wl-scale-tiny | wl-scale-neg | wl-scale-int | wl-many | wl-uuid-dotdot) exp=0 ;; esac
  [ "$name" = wl-big-random-pool ] && exp=x
  rm -rf "$T/fo"
  probe $exp "import-fib $name" -- env KVF_MAX_MEMORY_MIB=256 "$K" import-fib --root "$c" -o "$T/fo" "$c/def.json" "$c/wl.jsonl"
  # wl-dup-uuid: its first workload is written before the second line is refused (noted).
  if [ "$exp" = 2 ] && [ "$name" != wl-dup-uuid ] && [ -d "$T/fo" ] && [ -n "$(ls -A "$T/fo")" ]; then
    echo "BAD  LEFTOVER       import-fib $name left: $(ls -A "$T/fo" | head -3)"; bad=$((bad + 1))
  fi
done
good=$G/good
D=gqa_paged_decode_h4_kv2_d8_ps4
probe 2 "import-fib -o a file" -- "$K" import-fib -o "$seed" "$good"
probe 2 "import-fib -o /dev/null/x" -- "$K" import-fib -o /dev/null/x "$good"
probe 2 "import-fib -o /proc/x" -- "$K" import-fib -o /proc/kvfx "$good"
probe 2 "import-fib -o ''" -- "$K" import-fib -o "" "$good"
probe 2 "import-fib dataset is a file" -- "$K" import-fib -o "$T/fo2" "$seed"
probe 2 "import-fib dataset empty dir" -- "$K" import-fib -o "$T/fo2" "$T/emptydir"
probe 2 "import-fib def fifo" -- "$K" import-fib -o "$T/fo2" "$T/fifo.kvfz" "$good/workloads/gqa_paged/$D.jsonl"
probe 2 "import-fib wl fifo" -- "$K" import-fib -o "$T/fo2" "$good/definitions/gqa_paged/$D.json" "$T/fifo.kvfz"
probe 2 "import-fib wl /dev/zero" -- "$K" import-fib -o "$T/fo2" "$good/definitions/gqa_paged/$D.json" /dev/zero
probe 2 "import-fib def /dev/zero" -- "$K" import-fib -o "$T/fo2" /dev/zero "$good/workloads/gqa_paged/$D.jsonl"
probe 2 "import-fib wl dir" -- "$K" import-fib -o "$T/fo2" "$good/definitions/gqa_paged/$D.json" "$good"
probe 2 "import-fib wl sparse 3G" -- "$K" import-fib -o "$T/fo2" "$good/definitions/gqa_paged/$D.json" "$T/sparse.kvfz"
probe 2 "import-fib three operands" -- "$K" import-fib -o "$T/fo2" a b c
probe 2 "import-fib --definition ''" -- "$K" import-fib --definition "" -o "$T/fo2" "$good"
probe 2 "import-fib --definition ../x" -- "$K" import-fib --definition "../x" -o "$T/fo2" "$good"
probe 2 "import-fib --root missing" -- "$K" import-fib --root "$T/nope" -o "$T/fo2" "$good"
cp -r "$good" "$T/dsl" && ln -sf /dev/zero "$T/dsl/definitions/gqa_paged/gqa_paged_decode_zz.json"
probe 2 "import-fib dataset def -> /dev/zero" -- "$K" import-fib -o "$T/fo3" "$T/dsl"
cp -r "$good" "$T/dsf" && mkfifo "$T/dsf/workloads/gqa_paged/gqa_paged_decode_h4_kv2_d8_ps1.jsonl.tmp" && \
  rm "$T/dsf/workloads/gqa_paged/gqa_paged_decode_h4_kv2_d8_ps1.jsonl" && \
  mv "$T/dsf/workloads/gqa_paged/gqa_paged_decode_h4_kv2_d8_ps1.jsonl.tmp" "$T/dsf/workloads/gqa_paged/gqa_paged_decode_h4_kv2_d8_ps1.jsonl"
probe 2 "import-fib dataset workloads fifo" -- "$K" import-fib -o "$T/fo4" "$T/dsf"
cp -r "$good" "$T/dsd" && mkdir "$T/dsd/definitions/gqa_paged/gqa_paged_decode_dir.json"
probe 2 "import-fib dataset def is a dir" -- "$K" import-fib -o "$T/fo5" "$T/dsd"
cp -r "$good" "$T/dsloop" && ln -s loop "$T/dsloop/definitions/gqa_paged/loop" && ln -s loop2 "$T/dsloop/definitions/gqa_paged/loop2" 2>/dev/null
ln -sf "$T/dsloop/definitions/gqa_paged/x2.json" "$T/dsloop/definitions/gqa_paged/gqa_paged_decode_x1.json"
ln -sf "$T/dsloop/definitions/gqa_paged/gqa_paged_decode_x1.json" "$T/dsloop/definitions/gqa_paged/x2.json"
probe 2 "import-fib dataset symlink loop def" -- "$K" import-fib -o "$T/fo6" "$T/dsloop"
# export
"$K" import-fib -o "$T/cases" "$good" >/dev/null 2>&1
mkdir "$T/fnd" && cp "$T/cases/${D}_w-random-q.kvfz" "$T/fnd/o-tolerance-0123.kvfz"
probe 0 "export-fib a finding (control)" -- "$K" export-fib --kernel cpu-ref -o "$T/ex0" "$T/fnd"
echo 'garbage' >"$T/fnd/o-tolerance-0123.json"
probe 2 "export-fib garbage report" -- "$K" export-fib -o "$T/ex1" "$T/fnd"
rm "$T/fnd/o-tolerance-0123.json"; mkfifo "$T/fnd/o-tolerance-0123.json"
probe 2 "export-fib report fifo" -- "$K" export-fib -o "$T/ex2" "$T/fnd"
rm "$T/fnd/o-tolerance-0123.json"; ln -s /dev/zero "$T/fnd/o-tolerance-0123.json"
probe 2 "export-fib report /dev/zero" -- "$K" export-fib -o "$T/ex3" "$T/fnd"
rm "$T/fnd/o-tolerance-0123.json"; echo '{"kernel": 5}' >"$T/fnd/o-tolerance-0123.json"
probe 2 "export-fib report kernel number" -- "$K" export-fib -o "$T/ex4" "$T/fnd"
echo '{"kernel": "nope"}' >"$T/fnd/o-tolerance-0123.json"
probe 2 "export-fib report kernel unknown" -- "$K" export-fib -o "$T/ex5" "$T/fnd"
echo '{"kernel": "cpu-ref"}' >"$T/fnd/o-tolerance-0123.json"
probe 0 "export-fib report ok" -- "$K" export-fib -o "$T/ex6" "$T/fnd"
probe 2 "export-fib -o a file" -- "$K" export-fib --kernel cpu-ref -o "$seed" "$T/fnd"
probe 2 "export-fib -o /dev/null/x" -- "$K" export-fib --kernel cpu-ref -o /dev/null/x "$T/fnd"
mkdir -p "$T/ex7/definitions/gqa_paged/${D}.json"
probe 2 "export-fib -o has a dir where a file goes" -- "$K" export-fib --kernel cpu-ref -o "$T/ex7" "$T/fnd"
mkdir -p "$T/ex8" && : >"$T/ex8/blob"
probe 2 "export-fib -o has a file where blob/ goes" -- "$K" export-fib --kernel cpu-ref -o "$T/ex8" "$T/fnd"
probe 2 "export-fib fifo finding" -- "$K" export-fib --kernel cpu-ref -o "$T/ex9" "$T/fifo.kvfz"
probe 2 "export-fib empty dir" -- "$K" export-fib --kernel cpu-ref -o "$T/ex10" "$T/emptydir"
probe 2 "export-fib --jobs 0" -- "$K" export-fib --kernel cpu-ref --jobs 0 -o "$T/ex11" "$T/fnd"
probe 2 "export-fib --kernel ''" -- "$K" export-fib --kernel "" -o "$T/ex12" "$T/fnd"

# ---- outputs that would replace inputs, names that are patterns, readers of JSON files --------
cp "$small" "$T/victim.kvfz"
probe 2 "replay --stats is its own case" -- "$K" replay --kernel cpu-ref --stats "$T/victim.kvfz" "$T/victim.kvfz"
cmp -s "$small" "$T/victim.kvfz" || { echo "BAD  CLOBBERED     replay --stats wrote over its case"; bad=$((bad + 1)); }
mkfifo "$T/solution-fifo.json"
probe 2 "replay --kernel FIFO solution.json" -- "$K" replay --kernel "$T/solution-fifo.json" "$small"
cp -r "$G/good" "$T/ds[1]"
probe 0 "import-fib dataset named ds[1]" -- "$K" import-fib -o "$T/bracket" "$T/ds[1]"
cp "$T/cases/${D}_w-random-q.kvfz" "$T/fnd/o-tolerance-0123.kvfz"
rm -f "$T/fnd/o-tolerance-0123.json"; mkfifo "$T/fnd/o-tolerance-0123.json"
probe 2 "minimize, report a FIFO" -- "$K" minimize --kernel cpu-ref -o "$T/m2.kvfz" "$T/fnd/o-tolerance-0123.kvfz"
probe 0 "replay, report a FIFO" -- "$K" replay "$T/fnd/o-tolerance-0123.kvfz"
python3 - "$T/good.json" "$T/big-counts.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for grp in g["groups"]:
    grp["cases"] += 6 * 2**60
    grp["passed"] += 6 * 2**60
json.dump(g, open(sys.argv[2], "w"))
PY
probe 2 "report --merge past 2^63" -- "$K" report --quiet --merge "$T/bm.json" "$T/big-counts.json" "$T/big-counts.json"
probe 2 "mutants --seeds missing" -- "$K" mutants --seeds "$T/nope-seeds" --budget 1

echo "$bad of $n probes flagged"
