#!/usr/bin/env bash
# Submits a kvfuzz campaign array and its report job to Slurm (docs/scaling.md, "Slurm"):
#
#   scripts/slurm/submit.sh --dir DIR [--tasks N] [--gpus N] [--cpus N] [--time LIMIT]
#                           [--kernel K] [--cpu] [--seconds N] [--partition P]
#                           [--fuzz-args "OPTIONS"]
#
#   --dir DIR          the shared folder, on a file system every node mounts (required)
#   --tasks N          array tasks (default 4)
#   --gpus N           GPUs per task: --gres=gpu:N (default 1)
#   --cpus N           CPUs per task (default 16 per GPU; 1 with --cpu)
#   --time LIMIT       each task's time limit, as sbatch --time takes it (default 02:00:00);
#                      the campaign stops a margin before it
#   --kernel K         the kernel (default cuda; cpu-splitkv with --cpu)
#   --cpu              without GPUs: --gres=none and no --devices
#   --seconds N        a campaign length shorter than the time limit allows
#   --partition P      the partition (default: the cluster's)
#   --fuzz-args "..."  more `kvfuzz fuzz` options, split at spaces
#
# Every task runs kvfuzz-array.sbatch: `kvfuzz fuzz --devices all` on the GPUs it was granted,
# into DIR/corpus and DIR/findings, its summary in DIR/logs. The report job
# (kvfuzz-report.sbatch) waits for the whole array (--dependency=afterany) and writes
# DIR/report. Prints the two job ids. The kvfuzz binary is KVFUZZ, else the one on the PATH,
# else this checkout's build/cli/kvfuzz.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() { # the comment at the top of this file
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit "${1:-2}"
}
bad() {
  echo "submit.sh: $*" >&2
  exit 2
}
need_value() { [ $# -ge 2 ] || bad "$1 needs a value"; }

dir="" tasks=4 gpus=1 cpus="" time_limit=02:00:00 kernel="" cpu=0 seconds="" partition=""
fuzz_args=""
while [ $# -gt 0 ]; do
  case $1 in
  -h | --help) usage 0 ;;
  --dir) need_value "$@"; dir=$2; shift 2 ;;
  --tasks) need_value "$@"; tasks=$2; shift 2 ;;
  --gpus) need_value "$@"; gpus=$2; shift 2 ;;
  --cpus) need_value "$@"; cpus=$2; shift 2 ;;
  --time) need_value "$@"; time_limit=$2; shift 2 ;;
  --kernel) need_value "$@"; kernel=$2; shift 2 ;;
  --seconds) need_value "$@"; seconds=$2; shift 2 ;;
  --partition) need_value "$@"; partition=$2; shift 2 ;;
  --fuzz-args) need_value "$@"; fuzz_args=$2; shift 2 ;;
  --cpu) cpu=1; shift ;;
  *) bad "unknown option \"$1\" (see --help)" ;;
  esac
done
[ -n "$dir" ] || bad "--dir must name the shared folder"
case $tasks in '' | *[!0-9]* | 0) bad "--tasks must be a positive integer, got \"$tasks\"" ;; esac
case $gpus in '' | *[!0-9]* | 0) bad "--gpus must be a positive integer, got \"$gpus\"" ;; esac
case $seconds in *[!0-9]*) bad "--seconds must be a positive integer, got \"$seconds\"" ;; esac
[ -z "$cpus" ] && { if [ "$cpu" = 1 ]; then cpus=1; else cpus=$((gpus * 16)); fi; }
case $cpus in '' | *[!0-9]* | 0) bad "--cpus must be a positive integer, got \"$cpus\"" ;; esac
command -v sbatch >/dev/null || bad "sbatch is not on the PATH: this is no Slurm submit host"

kvfuzz=${KVFUZZ:-}
if [ -z "$kvfuzz" ]; then
  kvfuzz=$(command -v kvfuzz || true)
  [ -n "$kvfuzz" ] || kvfuzz=$here/../../build/cli/kvfuzz
fi
[ -x "$kvfuzz" ] || bad "no kvfuzz binary at \"$kvfuzz\" (set KVFUZZ, or build with scripts/setup.sh)"
kvfuzz=$(cd "$(dirname "$kvfuzz")" && pwd)/$(basename "$kvfuzz")
mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)

export KVF_DIR=$dir KVFUZZ=$kvfuzz KVF_ARGS=$fuzz_args KVF_TIME=$seconds
common=()
[ -n "$partition" ] && common+=(--partition "$partition")
if [ "$cpu" = 1 ]; then
  export KVF_DEVICES=none KVF_KERNEL=${kernel:-cpu-splitkv}
  gres=(--gres=none)
else
  export KVF_DEVICES=all KVF_KERNEL=${kernel:-cuda}
  gres=(--gres="gpu:$gpus")
fi
array=$(sbatch --parsable --export=ALL "${common[@]}" "${gres[@]}" --array="0-$((tasks - 1))" \
  --cpus-per-task="$cpus" --time="$time_limit" --output="$dir/logs/%A_%a.log" \
  "$here/kvfuzz-array.sbatch")
array=${array%%;*} # --parsable prints JOBID[;CLUSTER]
report=$(KVF_ARRAY_JOB=$array sbatch --parsable --export=ALL "${common[@]}" \
  --dependency="afterany:$array" --output="$dir/logs/report-%j.log" \
  "$here/kvfuzz-report.sbatch")
report=${report%%;*}
echo "array $array ($tasks task(s)), report $report; logs in $dir/logs, report in $dir/report"
