#!/usr/bin/env bash
# The fine-tuned follow-up methods of the Beyond page (DSP exact-k gates; fixed masks: random
# heads per seed and the top heads by LRP, confidence and gradient importance), each with the
# Hard Concrete budget, at every encoder head count K, on one GPU: one process per K, its points
# one after another (each a JSON file under results/<profile>/<pair>/seed<seed>/pruning/).
# Then: python -m headlib.book run --notebooks 08_beyond ... with -p finetune_heads set to $K.
#
# Needs what scripts/gpu_sweep.sh needs, and importance_measures.csv (written by notebook 08).
set -u
PROFILE=${PROFILE:-cpu}; PAIR=${PAIR:-en-de}; SEED=${SEED:-1}; STEPS=${STEPS:-500}
K=${K:-40,24,17,12,10,3}; LOG=${LOG:-artifacts/logs/gpu_methods}; DEADLINE=${DEADLINE:-3000}
mkdir -p "$LOG"; export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
start=$(date +%s)
for k in ${K//,/ }; do
  ( for what in dsp fixed; do
      python3 -m headlib.sweep "$what" --k "$k" --steps "$STEPS" --profile "$PROFILE" --pair "$PAIR" --seed "$SEED"
    done >"$LOG/k$k.log" 2>&1; echo "k=$k rc=$? $(( $(date +%s) - start ))s" >>"$LOG/status" ) &
done
while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - start )) -lt "$DEADLINE" ]; do sleep 5; done
pkill -f "headlib.sweep" 2>/dev/null
echo "done after $(( $(date +%s) - start ))s" >>"$LOG/status"
