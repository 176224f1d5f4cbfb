#!/usr/bin/env bash
# The "from scratch" column of the Beyond page on one GPU: for each encoder head count K, the
# baseline's recipe and number of updates (read from the committed training_results.json), trained
# with the fixed mask of the Hard Concrete point that kept K encoder heads; one process per K, side
# by side. Needs $HEADLIB_DATA, the BPE cache and the committed Hard Concrete points, not the
# trained baseline. Each run writes results/<profile>/<pair>/seed<seed>/pruning/scratch-<digest>.json.
set -u
PROFILE=${PROFILE:-cpu}; PAIR=${PAIR:-en-de}; SEED=${SEED:-1}
K=${K:-$(python3 -m headlib grids --profile "$PROFILE" --key method_heads)}   # the profile's grid (headlib.profiles.Grids)
LOG=${LOG:-artifacts/logs/gpu_scratch}; DEADLINE=${DEADLINE:-3000}
RESULTS=results/$PROFILE/$PAIR/seed$SEED
STEPS=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['steps'])" "$RESULTS/training_results.json")
mkdir -p "$LOG"; export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m headlib.pruning pick --profile "$PROFILE" --pair "$PAIR" --seed "$SEED" --kinds enc-self --totals "$K" >"$LOG/specs.txt"
i=0
while read -r spec; do
  ( python3 -m headlib.pruning scratch --spec "$spec" --max-steps "$STEPS" --profile "$PROFILE" --pair "$PAIR" --seed "$SEED" \
      >"$LOG/scratch-$i.log" 2>&1; echo "scratch-$i rc=$? $(( $(date +%s) - start ))s" >>"$LOG/status" ) &
  i=$((i + 1))
done <"$LOG/specs.txt"
while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - start )) -lt "$DEADLINE" ]; do sleep 5; done
pkill -f "headlib.pruning " 2>/dev/null
echo "done after $(( $(date +%s) - start ))s" >>"$LOG/status"
