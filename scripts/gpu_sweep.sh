#!/usr/bin/env bash
# The Sec. 6 pruning sweep of the cpu-profile en-de model, run on one GPU as many processes
# (each a few hundred tiny kernels per update, so they share the GPU well). This is how the
# committed tables under results/cpu/en-de/seed1/pruning/ were computed; the notebooks read those
# tables and compute any missing point themselves (on CPU if that is all there is).
#
# Two chains run side by side, encoder-only and all kinds: Hard Concrete fine-tuning at each
# lambda (two lambdas per process), then from-scratch runs with the fixed masks of the points
# nearest to the paper's configurations (encoder: 17 and 10 heads; all kinds: 58 and 36 heads in
# total), with the cpu baseline's number of updates. Beside them: the unpruned model scored on
# this device, en-de from scratch with all heads (the control for the from-scratch column), and
# en-ru trained with the cpu recipe and the same number of updates.
#
# Needs: the baseline's run dir under $HEADLIB_ARTIFACTS/runs/, its BPE cache, $HEADLIB_DATA.
# Every job logs to $LOG/<job>.log; DEADLINE (seconds) stops whatever still runs, so that the
# finished points (written atomically, one file each) are kept.
set -u
PROFILE=${PROFILE:-cpu}; PAIR=${PAIR:-en-de}; SEED=${SEED:-1}
LOG=${LOG:-artifacts/logs/gpu_sweep}; DEADLINE=${DEADLINE:-3000}
ENC_LAMS=(0.0005,0.05 0.001,0.1 0.002,0.2 0.005,0.5 0.01,0.02)
ALL_LAMS=(0.0005,0.01 0.001,0.02 0.002,0.05 0.005,0.1)
STEPS=${STEPS:-500}   # fine-tuning updates per lambda
BUDGET=$(python3 -c "import sys; from headlib.train import trained_model
print(trained_model(sys.argv[1], sys.argv[2], int(sys.argv[3]))[2]['steps'])" "$PROFILE" "$PAIR" "$SEED")
mkdir -p "$LOG"; export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
start=$(date +%s)

job() {  # job NAME CMD... : run in the background, log, record the exit status
  local name=$1; shift
  ( "$@" >"$LOG/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - start ))s" >>"$LOG/status" ) &
}
sweep() { python3 -m headlib.sweep "$@" --profile "$PROFILE" --pair "$PAIR" --seed "$SEED"; }

chain() {  # chain NAME KINDS TOTALS LAMS... : one process per lambda group, then the scratch runs
  local name=$1 kinds=$2 totals=$3; shift 3
  local pids=() i=0 spec
  for lams in "$@"; do
    job "prune-$name-$i" sweep prune --steps "$STEPS" --kinds "$kinds" --lams "$lams" \
      $([ "$name$i" = enc0 ] && echo --full)
    pids+=($!); i=$((i + 1))
  done
  wait "${pids[@]}"
  python3 -m headlib.sweep pick --profile "$PROFILE" --pair "$PAIR" --seed "$SEED" --kinds "$kinds" \
    --totals "$totals" >"$LOG/specs-$name.txt"
  i=0
  while read -r spec; do
    job "scratch-$name-$i" sweep scratch --spec "$spec"; i=$((i + 1))
  done <"$LOG/specs-$name.txt"
  wait
}

job train-en-ru python3 -m headlib train --profile "$PROFILE" --pair en-ru --quiet \
  --set "train.max_steps=$BUDGET" --set train.max_minutes=0
job scratch-full sweep scratch --spec ""
chain enc enc-self 17,10 "${ENC_LAMS[@]}" &
chain all enc-self,dec-self,dec-enc 58,36 "${ALL_LAMS[@]}" &

while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - start )) -lt "$DEADLINE" ]; do sleep 5; done
pkill -f "headlib" 2>/dev/null; sleep 1
echo "done after $(( $(date +%s) - start ))s" >>"$LOG/status"
