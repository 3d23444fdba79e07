#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for tests/slurm_test.sh and for trying the batch
# scripts of this folder without a cluster: Debian's slurm-wlm and munge (scripts/setup.sh
# installs them with KVF_WITH_SLURM=1), its own munge key and socket, and a generated
# slurm.conf with this machine's real CPU count and memory. Everything lives under one folder
# (KVF_SLURM_DIR, default /tmp/kvfuzz-slurm) and listens on 127.0.0.1 on ports of its own
# (KVF_SLURM_PORT and the next one, default 16817), so a real cluster's daemons, keys and
# /etc/slurm are left alone. The node has GPUs as Slurm's gres: the NVIDIA device files where
# there are any, else two stand-ins (/dev/null, /dev/zero) so that --gres=gpu:N and the
# CUDA_VISIBLE_DEVICES Slurm sets for it can be exercised with a CPU kernel.
#
#   scripts/slurm/local-cluster.sh start    # exits 0 once the node takes jobs; prints the
#                                           # line to export: SLURM_CONF=DIR/slurm.conf
#   scripts/slurm/local-cluster.sh stop     # cancels its jobs, stops the daemons it started
#   scripts/slurm/local-cluster.sh status
#
# Needs root (the daemons run as root and the jobs as whoever submits them). Exit status: 0
# done, 1 a daemon would not start (its log's tail is printed), 3 Slurm cannot run here (not
# root, not installed), 2 bad usage.
set -euo pipefail

dir=${KVF_SLURM_DIR:-/tmp/kvfuzz-slurm}
port=${KVF_SLURM_PORT:-16817}
conf=$dir/slurm.conf
sock=$dir/munge/munge.socket.2
export SLURM_CONF=$conf
PATH=$PATH:/usr/sbin:/sbin # the daemons, where root's PATH lacks them

usage() {
  echo "usage: scripts/slurm/local-cluster.sh start|stop|status" >&2
  exit 2
}

# Why this machine cannot run the cluster, or nothing.
cannot_run() {
  if [ "$(id -u)" != 0 ]; then
    echo "the daemons need root (running as $(id -un))"
    return
  fi
  local missing=()
  for c in munged slurmctld slurmd sbatch squeue scancel scontrol; do
    command -v "$c" >/dev/null || missing+=("$c")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "Slurm is not installed (no ${missing[*]}; KVF_WITH_SLURM=1 scripts/setup.sh installs slurm-wlm and munge)"
  fi
}

# The pid the file holds, if that process is still the named program.
alive() { # alive FILE NAME
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  case $pid in '' | *[!0-9]*) return 1 ;; esac
  [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = "$2" ] || return 1
  echo "$pid"
}

# Stops the process whose pid the file holds, if it is still the named program.
stop_pid() { # stop_pid FILE NAME
  local pid
  pid=$(alive "$1" "$2") || {
    rm -f "$1"
    return 0
  }
  rm -f "$1"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    [ -d "/proc/$pid" ] || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  if alive "$dir/slurmctld.pid" slurmctld >/dev/null && scontrol ping >/dev/null 2>&1; then
    # Jobs first, so that no slurmstepd outlives its slurmd.
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
      # shellcheck disable=SC2086 # one job id per word
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 60); do
        [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.5
      done
    fi
  fi
  stop_pid "$dir/slurmd.pid" slurmd
  stop_pid "$dir/slurmctld.pid" slurmctld
  stop_pid "$dir/munged.pid" munged
}

# The tail of a daemon's log, for a start that failed.
show_log() {
  echo "--- $1 (last lines)" >&2
  tail -n 15 "$1" >&2 2>/dev/null || true
}

start() {
  local why
  why=$(cannot_run)
  if [ -n "$why" ]; then
    echo "local-cluster: $why" >&2
    exit 3
  fi
  stop # whatever an earlier start left running
  mkdir -p "$dir"
  chmod 0700 "$dir"
  rm -rf "$dir/ctld" "$dir/slurmd" "$dir/munge"
  mkdir -p "$dir/ctld" "$dir/slurmd" "$dir/munge"
  chmod 0700 "$dir/munge"

  # A key of this cluster's own: munge signs every message between the daemons and the clients.
  if [ ! -s "$dir/munge.key" ]; then
    (umask 077 && head -c 1024 /dev/urandom >"$dir/munge.key")
  fi
  munged --socket="$sock" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" --force ||
    {
      show_log "$dir/munged.log"
      exit 1
    }

  # This machine as slurmd itself sees it, so that the node is never refused as smaller than
  # its configuration.
  local host hw cpus mem
  host=$(hostname -s)
  hw=$(slurmd -C | head -n 1)
  cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
  mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  if [ -z "$cpus" ] || [ -z "$mem" ]; then
    echo "local-cluster: slurmd -C did not describe this machine: $hw" >&2
    exit 1
  fi
  # GPUs as gres: Slurm hands a job the indices of its devices in CUDA_VISIBLE_DEVICES.
  local gpus=(/dev/nvidia[0-9]*)
  [ -e "${gpus[0]}" ] || gpus=(/dev/null /dev/zero)
  : >"$dir/gres.conf"
  for g in "${gpus[@]}"; do echo "Name=gpu File=$g" >>"$dir/gres.conf"; done
  cat >"$conf" <<EOF
# Generated by scripts/slurm/local-cluster.sh: a one-node cluster on 127.0.0.1.
ClusterName=kvfuzz-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/slurmd
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# No cgroups: containers and CI machines rarely let slurmd manage them. linuxproc still
# signals every process a job started, as a cluster's proctrack/cgroup does.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# Slurm's default: a cancelled or timed-out job gets SIGTERM, then SIGKILL 30 s later.
KillWait=30
MinJobAge=600
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:${#gpus[@]} State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -f "$conf" || {
    show_log "$dir/slurmctld.log"
    exit 1
  }
  slurmd -f "$conf" || {
    show_log "$dir/slurmd.log"
    exit 1
  }
  local state=""
  for _ in $(seq 60); do
    state=$(sinfo -h -N -o %t 2>/dev/null | head -n 1 || true)
    case $state in idle* | mix* | alloc*) break ;; esac
    sleep 0.5
  done
  case $state in
  idle* | mix* | alloc*) ;;
  *)
    echo "local-cluster: the node did not come up (state \"$state\")" >&2
    show_log "$dir/slurmctld.log"
    show_log "$dir/slurmd.log"
    stop
    exit 1
    ;;
  esac
  echo "local-cluster: node $host up ($cpus CPUs, $mem MiB, GPUs ${gpus[*]}) in $dir"
  echo "SLURM_CONF=$conf"
}

case ${1:-} in
start) start ;;
stop) stop ;;
status)
  why=$(cannot_run)
  if [ -n "$why" ]; then
    echo "local-cluster: $why"
    exit 3
  fi
  if alive "$dir/slurmctld.pid" slurmctld >/dev/null; then
    sinfo -N
  else
    echo "local-cluster: not running"
  fi
  ;;
*) usage ;;
esac
