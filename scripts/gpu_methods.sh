#!/usr/bin/env bash
# The fine-tuned follow-up methods of the Beyond page (DSP exact-k gates; fixed masks: random
# heads per seed and the top heads by LRP, confidence and gradient importance), each with the
# Hard Concrete budget, at every encoder head count K, on one GPU: one process per point (at most
# MAX_JOBS at once), each point a JSON file under results/<profile>/<pair>/seed<seed>/pruning/.
# Then: python -m headlib.book run --notebooks 08_beyond ... with -p finetune_heads set to $K.
#
# Needs what scripts/gpu_sweep.sh needs, and importance_measures.csv (written by notebook 08).
set -u
PROFILE=${PROFILE:-cpu}; PAIR=${PAIR:-en-de}; SEED=${SEED:-1}
grid() { python3 -m headlib grids --profile "$PROFILE" --key "$@"; }   # the profile's grids (headlib.profiles.Grids)
STEPS=${STEPS:-$(grid finetune_steps)}; K=${K:-$(grid method_heads)}
LABELS=${LABELS:-$(seq -s, -f "random-s%g" 1 "$(grid random_masks)"),michel,confidence,lrp}
LOG=${LOG:-artifacts/logs/gpu_methods}; DEADLINE=${DEADLINE:-3000}; MAX_JOBS=${MAX_JOBS:-12}
mkdir -p "$LOG"; export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
start=$(date +%s)
point() {  # point NAME SWEEP-ARGS... : one point in the background, logged, its exit status recorded
  local name=$1; shift
  while [ "$(jobs -r | wc -l)" -ge "$MAX_JOBS" ]; do sleep 2; done
  ( python3 -m headlib.pruning "$@" --steps "$STEPS" --profile "$PROFILE" --pair "$PAIR" --seed "$SEED" \
      >"$LOG/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - start ))s" >>"$LOG/status" ) &
}
for k in ${K//,/ }; do
  point "k$k-dsp" dsp --k "$k"
  for label in ${LABELS//,/ }; do point "k$k-$label" fixed --k "$k" --labels "$label"; done
done
while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - start )) -lt "$DEADLINE" ]; do sleep 5; done
pkill -f "headlib.pruning " 2>/dev/null
echo "done after $(( $(date +%s) - start ))s" >>"$LOG/status"
