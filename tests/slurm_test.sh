#!/usr/bin/env bash
# Campaign arrays on a real Slurm (scripts/slurm/, docs/scaling.md): a one-node cluster on
# this machine (scripts/slurm/local-cluster.sh: Debian's slurm-wlm and munge, which
# KVF_WITH_SLURM=1 scripts/setup.sh installs) runs an array of three 20 s CPU campaigns of a
# mutant kernel through scripts/slurm/submit.sh, with the report job that depends on it.
# Mid-run, one task is cancelled (scancel: Slurm's SIGTERM, then SIGKILL after KillWait) and
# another is requeued (the same SIGTERM, then a second run). Checked: the merged report holds
# every task's run with its task id, seed and cases/s; the findings are saved once each, and
# every finding a task announced is on disk with its report; the cancelled task's summary says
# it was stopped by SIGTERM, well within KillWait, and its statistics are complete; the
# requeued task's second run starts from the shared corpus; no temporary file is left. Then
# the GPU variant (--gres=gpu:1, --devices all) on the node's GPUs, or stand-ins for them.
# Before that, without Slurm: `--devices all` reads CUDA_VISIBLE_DEVICES as CUDA does
# (Slurm's NoDevFiles, -1). Skips (77) only where Slurm cannot run: not root, not installed.
set -euo pipefail
kvfuzz=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
t_start=$(date +%s)
elapsed() { echo $(($(date +%s) - t_start)); }

# ---- CUDA_VISIBLE_DEVICES as Slurm sets it -------------------------------------------------
for v in NoDevFiles -1; do
  if CUDA_VISIBLE_DEVICES=$v "$kvfuzz" fuzz --kernel cpu-ref --devices all --runs 5 \
    --findings "$tmp/dev" >"$tmp/out" 2>"$tmp/err"; then
    fail "CUDA_VISIBLE_DEVICES=$v: --devices all ran on a GPU CUDA would not show"
  elif ! grep -q "no GPU is visible (CUDA_VISIBLE_DEVICES=\"$v\" names none)" "$tmp/err"; then
    fail "CUDA_VISIBLE_DEVICES=$v: $(cat "$tmp/err")"
  fi
done
CUDA_VISIBLE_DEVICES=0,-1,1 "$kvfuzz" fuzz --kernel cpu-ref --devices all --runs 10 \
  --findings "$tmp/dev" >"$tmp/out" 2>"$tmp/err" || fail "--devices all with 0,-1,1: $(cat "$tmp/err")"
grep -q "devices: 1, " "$tmp/out" || fail "0,-1,1 is one GPU to CUDA: $(grep devices: "$tmp/out")"

# ---- the Kubernetes alternative: syntax only (no cluster here) ----------------------------
if python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$repo"/scripts/k8s/*.yaml <<'PY' >"$tmp/k8s" || fail "scripts/k8s: $(cat "$tmp/k8s")"
import sys, yaml
for path in sys.argv[1:]:
    for doc in yaml.safe_load_all(open(path)):
        assert doc["apiVersion"] == "batch/v1" and doc["kind"] == "Job", path
        cmd = doc["spec"]["template"]["spec"]["containers"][0]["command"]
        if doc["spec"].get("completionMode") == "Indexed":
            assert "JOB_COMPLETION_INDEX" in cmd[-1], path
            print(cmd[-1])
PY
  if [ ! -s "$tmp/k8s" ] || ! sh -n -c "$(cat "$tmp/k8s")"; then
    fail "the Indexed Job's shell command"
  fi
else
  echo "note: python3 has no yaml module: scripts/k8s/*.yaml not checked"
fi

# ---- the cluster ---------------------------------------------------------------------------
cluster=$repo/scripts/slurm/local-cluster.sh
why=$("$cluster" status 2>&1) || true
case $why in
"local-cluster: "*"root"* | "local-cluster: Slurm is not installed"*)
  echo "SKIP: Slurm cannot start here: ${why#local-cluster: }"
  rm -rf "$tmp"
  exit 77
  ;;
esac
# One local cluster at a time on this machine (its folder and ports are fixed).
exec 9>/tmp/kvfuzz-slurm.lock
flock -w 600 9 || {
  echo "FAIL: another local Slurm cluster held /tmp/kvfuzz-slurm.lock for 10 minutes"
  exit 1
}
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  "$cluster" stop >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
"$cluster" start >"$tmp/start" 2>&1 9>&- || { # the daemons must not hold the lock
  cat "$tmp/start"
  echo "FAIL: the local Slurm cluster did not start"
  exit 1
}
export SLURM_CONF=/tmp/kvfuzz-slurm/slurm.conf
echo "slurm: $(head -n 1 "$tmp/start") after $(elapsed) s"

# Waits until COMMAND succeeds, at most SECONDS.
wait_for() { # wait_for SECONDS WHAT COMMAND...
  local limit=$1 what=$2
  shift 2
  local end=$(($(date +%s) + limit))
  until "$@"; do
    if [ "$(date +%s)" -ge "$end" ]; then
      fail "gave up after $limit s waiting for $what; queue: $(squeue -h 2>&1 | tr '\n' ';')"
      return 1
    fi
    sleep 0.5
  done
}
# shellcheck disable=SC2317 # called through wait_for
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1; }
is_state() { [ "$(job_state "$1")" = "$2" ]; }
# A task's campaign has run its first 5 s: its progress line is in its log.
# shellcheck disable=SC2317 # called through wait_for
progressed() { grep -q "^kvfuzz fuzz: .*5s  cases" "$1" 2>/dev/null; }
# A requeued task has started again, else its start time is set to now once more (an update
# made while Slurm still settles the requeue may not take).
# shellcheck disable=SC2317 # called through wait_for
started_again() {
  is_state "$1" PENDING || return 0
  scontrol update jobid="$1" StartTime=now 2>/dev/null || true
  return 1
}
# shellcheck disable=SC2317 # called through wait_for
gone() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }

dir=$tmp/shared
KVFUZZ=$kvfuzz "$repo/scripts/slurm/submit.sh" --dir "$dir" --cpu --tasks 3 --seconds 20 \
  --time 3 --kernel cpu-splitkv/mut=trunc-store >"$tmp/submit" || {
  echo "FAIL: submit.sh: $(cat "$tmp/submit")"
  exit 1
}
read -r _ array _ _ _ report _ <"$tmp/submit"
report=${report%;}
echo "slurm: $(cat "$tmp/submit")"

# scancel task 1 in mid-run: Slurm's own SIGTERM to every process of the task.
if wait_for 90 "task 1 to run 5 s" progressed "$dir/logs/${array}_1.log"; then
  cancelled_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  scancel "${array}_1"
  echo "slurm: scancel ${array}_1 at $(elapsed) s"
fi
# Requeue task 2 in mid-run (as preemption does), and let it start again at once (Slurm
# holds a requeued job for two minutes otherwise).
if wait_for 90 "task 2 to run 5 s" progressed "$dir/logs/${array}_2.log"; then
  scontrol requeue "${array}_2"
  echo "slurm: scontrol requeue ${array}_2 at $(elapsed) s"
  # Not in the second of the requeue: slurmd refuses a job credential made in the second its
  # last one was revoked ("Job credential revoked"), and the task then ends without its second
  # run. Slurm's own hold of a requeued job (121 s) is what keeps real clusters clear of that.
  wait_for 60 "task 2 to be requeued" is_state "${array}_2" PENDING && sleep 2 &&
    wait_for 60 "task 2's second run to start" started_again "${array}_2"
fi
wait_for 240 "the report job" gone "$report" || true
echo "slurm: array and report done at $(elapsed) s"

# ---- what the report job wrote ----------------------------------------------------------------
log=$dir/logs/report-$report.log
[ -s "$dir/report/index.html" ] || fail "no report: $(tail -5 "$log" 2>&1)"
sed -n '/^tasks:/,$p' "$log"
tags="slurm-${array}_0 slurm-${array}_1 slurm-${array}_2 slurm-${array}_2-r1"
python3 - "$dir/merged-stats.json" "$dir/report/summary.json" "$array" <<'PY' || fail "the merged report"
import json, re, sys
merged = json.load(open(sys.argv[1]))
summary = json.load(open(sys.argv[2]))
array = sys.argv[3]
runs = {}
for s in merged["sources"]:
    tag = re.search(r"--tag (\S+)", s["command"]).group(1)
    seed = re.search(r"--seed (\d+)", s["command"]).group(1)
    runs[tag] = seed
want = {f"slurm-{array}_{t}" for t in (0, 1, 2)} | {f"slurm-{array}_2-r1"}
assert set(runs) == want, f"sources {sorted(runs)}, expected {sorted(want)}"
assert len(set(runs.values())) == len(runs), f"seeds repeat: {runs}"
tasks = {re.match(rf"slurm-{array}_(\d+)", t).group(1) for t in runs}
assert tasks == {"0", "1", "2"}, tasks
assert summary["inputs"][0]["runs_merged"] == 4, summary["inputs"]
print(f"slurm: merged report: {len(runs)} runs of tasks {sorted(tasks)}: " +
      ", ".join(f"{t} seed {s}" for t, s in sorted(runs.items())) +
      f"; {summary['findings']['count']} findings")
PY
grep -q "4 run(s) merged" "$dir/report/index.html" || fail "the page does not say 4 runs merged"
grep -q -- "--tag slurm-${array}_0" "$dir/report/index.html" || fail "the page lacks task 0's provenance"
for t in $tags; do
  grep -Eq "^$t +(done|stopped by SIGTERM) after [0-9.]+ s +[0-9]+ +[0-9.]+ [0-9]+$" \
    "$dir/report/tasks.txt" || fail "tasks.txt lacks $t's cases/s and findings"
done

# Findings: each saved once, each announced one on disk with its report.
nfiles=$(find "$dir/findings" -name '*.kvfz' ! -name '*.min.kvfz' | wc -l) # minimized cases apart
nnew=0
for s in "$dir"/logs/*.summary; do
  n=$(sed -n 's/^  findings: \([0-9]*\) new signature.*/\1/p' "$s")
  nnew=$((nnew + ${n:-0}))
done
reported=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["findings"]["count"])' \
  "$dir/report/summary.json")
[ "$nfiles" -gt 0 ] || fail "the mutant's campaigns found nothing"
[ "$nfiles" = "$nnew" ] || fail "$nfiles finding files, but the tasks announced $nnew new ones"
[ "$nfiles" = "$reported" ] || fail "$nfiles finding files, the report counts $reported"
grep -ho -- '-> [^;]*\.kvfz' "$dir"/logs/*.log | cut -c4- | sort -u >"$tmp/announced"
while read -r f; do
  if [ ! -s "$f" ] || [ ! -s "${f%.kvfz}.json" ]; then
    fail "announced finding $f is not on disk with its report"
  fi
done <"$tmp/announced"
[ "$(wc -l <"$tmp/announced")" = "$nfiles" ] || fail "$(wc -l <"$tmp/announced") findings announced, $nfiles on disk"

# The cancelled task: stopped by SIGTERM well within KillWait, its statistics complete.
c=slurm-${array}_1
clog=$dir/logs/${array}_1.log
head -n 1 "$dir/logs/$c.summary" | grep -q "^kvfuzz fuzz: stopped by SIGTERM after" ||
  fail "the cancelled task's summary: $(head -n 1 "$dir/logs/$c.summary")"
is_state "${array}_1" CANCELLED || fail "task 1 is $(job_state "${array}_1"), not CANCELLED"
stop_s=$(sed -n 's/.*kvfuzz ended \([0-9.]*\) s after SIGTERM.*/\1/p' "$clog")
if [ -z "$stop_s" ] || ! awk -v s="$stop_s" 'BEGIN { exit !(s < 15) }'; then
  fail "the orderly stop took \"$stop_s\" s of the 30 s KillWait: $(tail -3 "$clog")"
fi
echo "slurm: cancelled task: $(head -n 1 "$dir/logs/$c.summary" | sed 's/^kvfuzz fuzz: //'), ended ${stop_s} s after SIGTERM"
judged=$(sed -n 's/^  cases [0-9]* ([0-9.]*\/s), judged \([0-9]*\),.*/\1/p' "$dir/logs/$c.summary")
python3 - "$dir/findings/stats-$c.json" "${judged:-0}" "${cancelled_at:-}" <<'PY' ||
import json, sys
d = json.load(open(sys.argv[1]))
judged = int(sys.argv[2])
assert judged > 0, "the summary judged nothing"
assert not d["incomplete"], "incomplete"
assert d["kernels"][0]["ran"] == judged, (d["kernels"][0]["ran"], judged)
assert all(g["cases"] == judged for g in d["groups"]), [g["cases"] for g in d["groups"]]
assert d["sources"][0]["written"] >= sys.argv[3], (d["sources"][0]["written"], sys.argv[3])
PY
  fail "the cancelled task's statistics are not complete"

# The requeued task: its first run stopped by the requeue's SIGTERM, its second began from the
# corpus the tasks had built.
head -n 1 "$dir/logs/slurm-${array}_2.summary" | grep -q "stopped by SIGTERM" ||
  fail "the requeued task's first run: $(head -n 1 "$dir/logs/slurm-${array}_2.summary")"
entries=$(sed -n "s/^kvfuzz-task: slurm-${array}_2-r1 .*corpus \([0-9]*\) entries/\1/p" "$dir/logs/${array}_2.log")
[ "${entries:-0}" -gt 0 ] || fail "the requeued run did not start from the shared corpus (${entries:-no} entries)"
echo "slurm: requeued task: second run started from $entries corpus entries"

# Nothing half-written anywhere in the shared folder.
left=$(find "$dir" -name '.*.tmp.*' -o -name '.kvfuzz-write-check.*' -o -name '*.new')
[ -z "$left" ] || fail "temporary files left: $left"

# ---- the GPU variant: --gres=gpu:1 and --devices all -------------------------------------
# The local node's GPUs are its NVIDIA devices or stand-ins; either way Slurm gives each task
# one in CUDA_VISIBLE_DEVICES, and a CPU kernel pinned to it runs as on a GPU host.
gdir=$tmp/gpu
if KVFUZZ=$kvfuzz "$repo/scripts/slurm/submit.sh" --dir "$gdir" --tasks 2 --gpus 1 --cpus 1 \
  --seconds 5 --time 2 --kernel cpu-ref >"$tmp/submit" 2>&1; then
  read -r _ garray _ _ _ greport _ <"$tmp/submit"
  greport=${greport%;}
  wait_for 120 "the GPU variant's report job" gone "$greport" || true
  seen=""
  for t in 0 1; do
    glog=$gdir/logs/${garray}_$t.log
    gpu=$(sed -n 's/^kvfuzz-task: .*, GPUs \([^,]*\), corpus.*/\1/p' "$glog")
    case $gpu in
    '' | none) fail "task $t of the GPU variant saw no CUDA_VISIBLE_DEVICES: $(head -n 2 "$glog")" ;;
    *) seen="$seen $gpu" ;;
    esac
    grep -q "^  devices: 1, 1 worker(s) each" "$glog" || fail "GPU task $t did not run on one device"
    grep -q "^  placement: " "$glog" || fail "GPU task $t printed no placement line"
  done
  grep -q "device 0: [0-9]* cases" "$gdir/report/index.html" ||
    fail "the GPU variant's report lacks the per-device rates"
  echo "slurm: GPU variant: tasks given CUDA_VISIBLE_DEVICES$seen, each ran --devices all on one"
else
  fail "submit.sh (GPU variant): $(cat "$tmp/submit")"
fi

echo "slurm: $(elapsed) s in all"
[ "$failures" -eq 0 ] && echo "slurm: all checks passed"
exit $((failures > 0))
