#!/usr/bin/env bash
# The Sec. 6 pruning sweep of the cpu-profile en-de model, run on one GPU as many processes
# (each a few hundred tiny kernels per update, so they share the GPU well). This is how the
# committed tables under results/cpu/en-de/seed1/pruning/ were computed; the notebooks read those
# tables and compute any missing point themselves (on CPU if that is all there is).
#
# Two chains run side by side, encoder-only and all kinds: Hard Concrete fine-tuning at each
# lambda (two lambdas per process), then from-scratch runs with the fixed masks of the points
# of the profile's grid (`python -m headlib grids`), with the cpu baseline's number of updates.
# Beside them: the unpruned model scored on this device, en-de from scratch with all heads (the
# control for the from-scratch column), and en-ru trained with the cpu recipe and the same number of updates.
#
# Needs: the baseline's run dir under $HEADLIB_ARTIFACTS/runs/, its BPE cache, $HEADLIB_DATA.
# Every job logs to $LOG/<job>.log; DEADLINE (seconds) stops whatever still runs, so that the
# finished points (written atomically, one file each) are kept.
set -u
PROFILE=${PROFILE:-cpu}; PAIR=${PAIR:-en-de}; SEED=${SEED:-1}
LOG=${LOG:-artifacts/logs/gpu_sweep}; DEADLINE=${DEADLINE:-3000}
# The profile's grids (headlib.profiles.Grids): lambdas two per process, fine-tuning updates, and the
# head counts trained from scratch.
grid() { python3 -m headlib grids --profile "$PROFILE" --key "$@"; }
ENC_LAMS=($(grid lambdas_encoder --groups 2)); ALL_LAMS=($(grid lambdas_all --groups 2))
STEPS=${STEPS:-$(grid finetune_steps)}   # fine-tuning updates per lambda
BUDGET=$(python3 -c "import sys; from headlib.train import trained_model
print(trained_model(sys.argv[1], sys.argv[2], int(sys.argv[3]))[2]['steps'])" "$PROFILE" "$PAIR" "$SEED")
mkdir -p "$LOG"; export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
start=$(date +%s)

job() {  # job NAME CMD... : run in the background, log, record the exit status
  local name=$1; shift
  ( "$@" >"$LOG/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - start ))s" >>"$LOG/status" ) &
}
sweep() { python3 -m headlib.pruning "$@" --profile "$PROFILE" --pair "$PAIR" --seed "$SEED"; }

chain() {  # chain NAME KINDS TOTALS LAMS... : one process per lambda group, then the scratch runs
  local name=$1 kinds=$2 totals=$3; shift 3
  local pids=() i=0 spec
  for lams in "$@"; do
    job "prune-$name-$i" sweep prune --steps "$STEPS" --kinds "$kinds" --lams "$lams" \
      $([ "$name$i" = enc0 ] && echo --full)
    pids+=($!); i=$((i + 1))
  done
  wait "${pids[@]}"
  python3 -m headlib.pruning pick --profile "$PROFILE" --pair "$PAIR" --seed "$SEED" --kinds "$kinds" \
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
chain enc enc-self "$(grid scratch_heads_encoder)" "${ENC_LAMS[@]}" &
chain all enc-self,dec-self,dec-enc "$(grid scratch_heads_all)" "${ALL_LAMS[@]}" &

while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - start )) -lt "$DEADLINE" ]; do sleep 5; done
pkill -f "headlib" 2>/dev/null; sleep 1
echo "done after $(( $(date +%s) - start ))s" >>"$LOG/status"
