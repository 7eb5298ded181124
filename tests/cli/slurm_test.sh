#!/usr/bin/env bash
# docs/SCALE.md's Slurm recipe, shrunk, on a single-node Slurm started here: munged, slurmctld and
# slurmd with a configuration of this test's own, a 3-task job array of `tarnn sample --shard`,
# then the merge, which must equal one run byte for byte. Skipped (exit 77) without Slurm
# (Debian's slurm-wlm and munge) or root.
# usage: slurm_test.sh TARNN SOURCE_DIR
TARNN=$1
SRC=$2
source "$(dirname "$0")/cli_lib.sh"
for tool in slurmctld slurmd sbatch squeue munged; do
  command -v $tool >/dev/null || { echo "skipped: no $tool (apt-get install slurm-wlm munge)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "skipped: starting slurmd needs root"; exit 77; }
host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$work/spool" "$work/state" "$work/munge" "$work/jobs"
chmod 700 "$work/munge"
conf=$work/slurm.conf
cat >"$conf" <<CONF
ClusterName=tarnn-test
SlurmctldHost=$host
SlurmctldPort=36817
SlurmdPort=36818
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdSpoolDir=$work/spool
StateSaveLocation=$work/state
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmUser=root
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF=$conf
socket=$work/munge/munge.socket
munged --socket="$socket" --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
  --seed-file="$work/munge/seed" -f 2>"$work/munged.err" || { echo "skipped: munged did not start: $(cat "$work/munged.err")"; exit 77; }
export MUNGE_SOCKET=$socket # slurm's auth/munge reads the socket from its own option:
echo "AuthInfo=socket=$socket" >>"$conf"
slurmctld -f "$conf" && slurmd -f "$conf" || { echo "skipped: slurm daemons did not start"; exit 77; }
cleanup() { # the daemons stopped, and gone (their ports free for the next run), then their files
  scancel --quiet -u root 2>/dev/null
  local pids
  pids=$(cat "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munge/munged.pid" 2>/dev/null)
  # shellcheck disable=SC2086
  kill $pids 2>/dev/null
  for pid in $pids; do # a guard of 60 s against a daemon that does not end
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$work"
}
trap cleanup EXIT
# polls below wait for states that come (a node up, a job done); their deadlines only guard
# against a hang, generous for a slow or busy machine
for _ in $(seq 600); do sinfo -h -o %T 2>/dev/null | grep -qE "idle|mixed" && break; sleep 0.5; done
sinfo -h -o %T | grep -qE "idle|mixed" || { echo "skipped: the node did not come up: $(tail -3 "$work/slurmd.log")"; exit 77; }

cat >"$work/array.sh" <<JOB
#!/bin/bash
#SBATCH --array=0-2
#SBATCH --cpus-per-task=1
#SBATCH --output=$work/jobs/%A_%a.out
"$TARNN" sample --model "$SMALL" -n 3000 --seed 1 --shard \${SLURM_ARRAY_TASK_ID}/3 --threads 1 \\
  --npy "$work/jobs/shard-\${SLURM_ARRAY_TASK_ID}.npy" --resume --quiet
JOB
job=$(sbatch --parsable "$work/array.sh") && ok || bad "sbatch: $job"
for _ in $(seq 1200); do [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break; sleep 0.5; done
[ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && ok || bad "the job array did not end within 10 minutes"
for k in 0 1 2; do
  [ -s "$work/jobs/shard-$k.npy" ] && ok || bad "task $k wrote no shard: $(cat "$work/jobs/"*_$k.out 2>/dev/null)"
done
expect_ok $PY "$SRC/tools/merge_npy.py" "$work/merged.npy" "$work"/jobs/shard-{0,1,2}.npy
expect_ok "$TARNN" sample --model "$SMALL" -n 3000 --seed 1 --npy "$work/one.npy" --quiet
cmp -s "$work/merged.npy" "$work/one.npy" && ok || bad "the job array's shards merged differ from one run"
finish
