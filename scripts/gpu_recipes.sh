#!/usr/bin/env bash
# Issue 2's recipe search, on one GPU: the cpu profile's en-de model trained with other recipes for
# the same number of *target tokens* a 45-minute run on 2 cores gets with the fast kernels (the
# committed run: 8,576,411 tokens in 2,401 updates; the fast kernels train 1.17x faster on CPU:
# benchmarks/train_throughput.py), each recipe in its own process (at most MAX_JOBS at once).
# The best recipe is then confirmed by one 45-minute run on 2 CPU cores:
#   python -m headlib train --profile cpu --pair en-de --set train.fused_loss=true \
#       --set model.dropout_masks=int16 --set <the recipe's overrides>
# Output: one line per recipe in $OUT (test_2016_flickr beam-4 BLEU of the run's final weights).
set -u
PROFILE=${PROFILE:-cpu}; PAIR=${PAIR:-en-de}; LOG=${LOG:-artifacts/logs/gpu_recipes}; DEADLINE=${DEADLINE:-540}
MAX_JOBS=${MAX_JOBS:-12}; OUT=${OUT:-results/$PROFILE/$PAIR/seed1/recipes.tsv}
FAST="train.fused_loss=true model.dropout_masks=int16 train.max_minutes=0"
# name | overrides (2,810 updates of <= 4,096 tokens ~ 10.0M tokens; 5,620 of <= 2,048)
RECIPES=${RECIPES:-"committed|train.max_steps=2810
lr1.5e-3|train.max_steps=2810 train.lr=1.5e-3
lr2e-3|train.max_steps=2810 train.lr=2e-3
lr2e-3-warm800|train.max_steps=2810 train.lr=2e-3 train.warmup=800
linear-lr2e-3|train.max_steps=2810 train.lr=2e-3 train.schedule=linear
linear-lr3e-3|train.max_steps=2810 train.lr=3e-3 train.schedule=linear
linear-tok2048|train.max_steps=5620 train.max_tokens=2048 train.warmup=800 train.eval_every=400 train.lr=2e-3 train.schedule=linear
linear-tok1024|train.max_steps=11240 train.max_tokens=1024 train.warmup=1600 train.eval_every=800 train.lr=2e-3 train.schedule=linear
dropout0.3|train.max_steps=2810 model.dropout=0.3
dropout0.1|train.max_steps=2810 model.dropout=0.1
warm200|train.max_steps=2810 train.warmup=200
avg8|train.max_steps=2810 train.average_last=8
eval100-avg10|train.max_steps=2810 train.eval_every=100 train.average_last=10
tok2048|train.max_steps=5620 train.max_tokens=2048 train.eval_every=400
tok2048-lr7e-4|train.max_steps=5620 train.max_tokens=2048 train.eval_every=400 train.lr=7e-4
lr1.5e-3-dropout0.3|train.max_steps=2810 train.lr=1.5e-3 model.dropout=0.3
ls0.2|train.max_steps=2810 train.label_smoothing=0.2"}
mkdir -p "$LOG" "$(dirname "$OUT")"; export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
start=$(date +%s)
while IFS='|' read -r name overrides; do
  [ -z "$name" ] && continue
  while [ "$(jobs -r | wc -l)" -ge "$MAX_JOBS" ]; do sleep 2; done
  sets=(); for kv in $FAST $overrides; do sets+=(--set "$kv"); done
  ( python3 -m headlib train --profile "$PROFILE" --pair "$PAIR" "${sets[@]}" >"$LOG/$name.log" 2>&1
    echo "$name rc=$? $(( $(date +%s) - start ))s" >>"$LOG/status" ) &
done <<< "$RECIPES"
while [ -n "$(jobs -r)" ] && [ $(( $(date +%s) - start )) -lt "$DEADLINE" ]; do sleep 5; done
pkill -f "headlib train" 2>/dev/null
# Collect: every finished run of this search (its log names its run directory).
python3 - "$LOG" "$OUT" <<'EOF'
import json, re, sys
from pathlib import Path
import torch
log, out = Path(sys.argv[1]), Path(sys.argv[2])
device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
rows = ["recipe\tsteps\ttrain_tokens\tdev_best\ttest_2016_flickr_beam\tlen_alpha\tdevice\trun_dir"]
for path in sorted(log.glob("*.log")):
    dirs = re.findall(r'"run": "([^"]+)"', path.read_text(errors="replace"))   # printed by `headlib train`
    res = Path(dirs[-1]) / "results.json" if dirs else None
    if res is None or not res.is_file():
        rows.append(f"{path.stem}\tunfinished"); continue
    r = json.loads(res.read_text())
    best = max(h["dev_bleu"] for h in r["history"])
    rows.append(f"{path.stem}\t{r['steps']}\t{r['train_tokens']}\t{best}\t"
                f"{r['test']['test_2016_flickr']['beam']['bleu']}\t{r['len_alpha']}\t{device}\t{res.parent.name}")
out.write_text("\n".join(rows) + "\n")
print(out.read_text())
EOF
echo "done after $(( $(date +%s) - start ))s" >>"$LOG/status"
