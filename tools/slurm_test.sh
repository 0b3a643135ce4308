#!/usr/bin/env bash
# Sharded generation on a real Slurm cluster (docs/cluster.md): a one-node cluster on this
# machine (munged, slurmctld, slurmd started here, on free ports, with their state, sockets and
# logs in a temporary folder), then
#  1. the job array of tools/cluster/posenc-array.sbatch (sbatch --array=0-3 --wait), 4 shards
#     of `generate --scheme rope`, merged by tools/cluster/posenc-merge.sbatch (`posenc
#     catalog`): every file (SHA-256) the same as a one-process `posenc generate --scheme rope`;
#  2. the same array with task 2 made to fail, the merge submitted with afterany: the merge
#     exits 2 naming shard 2/4 and writes no catalog.json; task 2 rerun alone (--array=2), the
#     merge completes and the folder is again the one-process run's, file for file;
#  3. the daemons are stopped (scontrol shutdown, then munged --stop) and no process is left
#     holding a file of the cluster's folder.
# Debian's slurm-wlm and munge are installed when missing (apt-get, as root); without root or
# apt-get the test is skipped (exit 77). Run by ctest as
#   tools/slurm_test.sh <posenc> <source dir> <scratch dir>
set -euo pipefail
export LC_ALL=C
POSENC=$(realpath "$1")
SRC=$(realpath "$2")
WORK=$3
SCHEME=(--scheme rope)
T0=$SECONDS

have_slurm() {
  local p
  for p in munged slurmctld slurmd sbatch sinfo scontrol squeue; do
    command -v "$p" >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$p" >/dev/null || return 1
  done
}
export PATH=$PATH:/usr/sbin:/sbin
if ! have_slurm; then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "skipped: slurm-wlm and munge are not installed, and installing them needs root and apt-get"
    exit 77
  fi
  echo "installing slurm-wlm and munge (apt-get)"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
    slurm-wlm munge >/dev/null
  have_slurm || { echo "FAIL: slurm-wlm and munge installed, but a program is missing"; exit 1; }
  echo "installed in $((SECONDS - T0)) s"
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "skipped: the one-node cluster runs its daemons as root"
  exit 77
fi

rm -rf "$WORK"
mkdir -p "$WORK/logs"
# Sockets have a short path limit: the cluster lives in /tmp, the outputs in WORK.
RUN=$(mktemp -d /tmp/posenc-slurm.XXXXXX)
chmod 700 "$RUN"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Processes holding a file (cwd or descriptor) under $RUN: the daemons, their job steps.
holders() {
  local p
  for p in /proc/[0-9]*; do
    { readlink "$p/cwd"; ls -l "$p/fd" 2>/dev/null; } 2>/dev/null | grep -q "$RUN" && echo "${p#/proc/}"
  done
  return 0
}
STOPPED=0
stop_cluster() {
  [[ $STOPPED -eq 1 ]] && return 0
  STOPPED=1
  local i left
  scancel --full --quiet --user=root 2>/dev/null || true
  scontrol shutdown >/dev/null 2>&1 || true
  [[ -f $RUN/munged.pid ]] && munged --stop --socket="$RUN/munge.sock" >/dev/null 2>&1
  for i in $(seq 50); do
    left=$(holders | grep -vx "$$" || true)
    [[ -z $left ]] && break
    sleep 0.2
  done
  if [[ -n $left ]]; then
    fail "processes left after the shutdown: $(echo $left)"
    kill -9 $left 2>/dev/null || true
  fi
}
cleanup() {
  stop_cluster
  cp "$RUN"/*.log "$WORK/logs/" 2>/dev/null  # the daemons' logs, kept for a look afterwards
  rm -rf "$RUN"
}
trap cleanup EXIT

# ---- the cluster --------------------------------------------------------------------------
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
HOST=$(hostname -s)
CPUS=$(( $(nproc) < 2 ? $(nproc) : 2 ))
dd if=/dev/urandom of="$RUN/munge.key" bs=1024 count=1 status=none
chmod 400 "$RUN/munge.key"
mkdir -p "$RUN/ctld" "$RUN/spool"
export SLURM_CONF=$RUN/slurm.conf
# MinJobAge=4: `sbatch --wait` keeps polling every 2 s only when completed jobs are purged soon
# (it lengthens its poll with MinJobAge); with 600 each wait here lost up to 30 s (measured).
cat >"$SLURM_CONF" <<EOF
ClusterName=posenc
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$RUN/munge.sock
StateSaveLocation=$RUN/ctld
SlurmdSpoolDir=$RUN/spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$RUN/slurmctld.log
SlurmdLogFile=$RUN/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MailProg=/bin/true
MinJobAge=4
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=100 State=UNKNOWN
PartitionName=posenc Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
dump_logs() {
  local f
  for f in "$RUN"/*.log; do
    echo "---- $f"
    tail -20 "$f"
  done
}
munged --key-file="$RUN/munge.key" --socket="$RUN/munge.sock" --pid-file="$RUN/munged.pid" \
  --log-file="$RUN/munged.log" --seed-file="$RUN/munged.seed" --force ||
  { dump_logs; echo "FAIL: munged did not start"; exit 1; }
slurmctld -f "$SLURM_CONF" -i || { dump_logs; echo "FAIL: slurmctld did not start"; exit 1; }
slurmd -f "$SLURM_CONF" -N "$HOST" || { dump_logs; echo "FAIL: slurmd did not start"; exit 1; }
state=""
for i in $(seq 120); do
  state=$(sinfo -h -N -o %t 2>/dev/null || true)
  [[ $state == idle ]] && break
  sleep 0.5
done
if [[ $state != idle ]]; then
  dump_logs
  echo "FAIL: the node is not idle after 60 s (sinfo: '$state')"
  exit 1
fi
echo "cluster up in $((SECONDS - T0)) s: node $HOST, $CPUS CPUs ($(sinfo --version))"

# ---- the jobs -----------------------------------------------------------------------------
ARRAY=$SRC/tools/cluster/posenc-array.sbatch
MERGE=$SRC/tools/cluster/posenc-merge.sbatch
export POSENC
submit() {  # submit LOG_NAME [sbatch arguments]: the job's output in WORK/logs/LOG_NAME-*.out
  local name=$1
  shift
  sbatch --chdir="$WORK" --output="$WORK/logs/$name-%A_%a.out" "$@"
}
# "sha256  ./path" of every file of a folder but the lock file (hidden files included).
listing() {
  (cd "$1" && find . -type f ! -name .posenc.lock | sort | xargs sha256sum)
}
"$POSENC" generate "${SCHEME[@]}" --out "$WORK/single" 2>"$WORK/logs/single.log" ||
  { tail "$WORK/logs/single.log"; echo "FAIL: the one-process generate failed"; exit 1; }
listing "$WORK/single" >"$WORK/single.sha256"

# 1. The array, then the merge.
t=$SECONDS
submit shards --wait --array=0-3 "$ARRAY" 4 "$WORK/sharded" "${SCHEME[@]}" >/dev/null ||
  fail "the array of 4 shards did not succeed"
submit merge --wait "$MERGE" "$WORK/sharded" >/dev/null || fail "the merge job failed"
listing "$WORK/sharded" >"$WORK/sharded.sha256"
cmp -s "$WORK/single.sha256" "$WORK/sharded.sha256" ||
  fail "4 shards + merge differ from the one-process run: $(diff "$WORK/single.sha256" "$WORK/sharded.sha256" | head -5)"
echo "array of 4 shards + merge: $((SECONDS - t)) s"

# 2. Task 2 fails; the merge (afterany) refuses; task 2 rerun alone; the merge completes.
t=$SECONDS
cat >"$RUN/posenc-task2-fails" <<EOF
#!/usr/bin/env bash
[[ \${SLURM_ARRAY_TASK_ID:-} == 2 ]] && { echo "task 2 fails on purpose" >&2; exit 1; }
exec "$POSENC" "\$@"
EOF
chmod +x "$RUN/posenc-task2-fails"
jid=$(POSENC=$RUN/posenc-task2-fails submit failing --parsable --array=0-3 "$ARRAY" 4 "$WORK/failed" "${SCHEME[@]}")
jid=${jid%%;*}
rc=0
submit refused --wait --dependency="afterany:$jid" "$MERGE" "$WORK/failed" >/dev/null || rc=$?
merge_log=$(cat "$WORK"/logs/refused-*.out)
[[ $rc -eq 2 ]] || fail "the merge after a failed shard exited $rc, expected 2"
grep -q "shard 2/4" <<<"$merge_log" || fail "the refused merge does not name shard 2/4: $merge_log"
[[ -e $WORK/failed/catalog.json ]] && fail "the refused merge wrote a catalog.json"
submit rerun --wait --array=2 "$ARRAY" 4 "$WORK/failed" "${SCHEME[@]}" >/dev/null ||
  fail "task 2 rerun alone did not succeed"
submit merge2 --wait "$MERGE" "$WORK/failed" >/dev/null || fail "the merge after the rerun failed"
listing "$WORK/failed" >"$WORK/failed.sha256"
cmp -s "$WORK/single.sha256" "$WORK/failed.sha256" ||
  fail "failed shard rerun + merge differ from the one-process run: $(diff "$WORK/single.sha256" "$WORK/failed.sha256" | head -5)"
echo "failed shard, refused merge, rerun, merge: $((SECONDS - t)) s"

# 3. The daemons stop and leave no process behind.
stop_cluster
[[ $failures -eq 0 ]] || { dump_logs; echo "slurm test: $failures failure(s)"; exit 1; }
echo "slurm test: passed in $((SECONDS - T0)) s ($(wc -l <"$WORK/single.sha256") files compared)"
