"""How far a replay on other kernels drifts from the committed run, and whether the study's head
rankings notice.

    python benchmarks/replay_drift.py --pair en-fr [--json results/cpu/benchmarks/replay_drift_en-fr.json]

Reads this machine's finished run of the cpu profile (`artifacts/runs/<run>/results.json` and
`final.pt`, from `python -m headlib train --profile cpu --pair PAIR`, which replays the committed
number of updates) and the committed record (`results/cpu/<pair>/seed1/training_results.json`).
Reports both machines' kernels, the dev BLEU at every evaluation, the test BLEU, and, on the
Sec. 4 sentences and definitions (500 held-out sentences, conservative LRP per step, confidence
with EOS excluded), the rank correlation of this model's head relevance and confidence with the
committed `head_importance.csv`, and how many layers keep their most relevant head.
"""
from __future__ import annotations

import argparse
import json
import sys

import pandas as pd
from scipy.stats import spearmanr

from headlib.analysis.heads import confidence, encoder_attention, importance_table
from headlib.analysis.lrp import head_relevance
from headlib.config import get_config
from headlib.data.corpora import analysis_sentences
from headlib.files import write_json
from headlib.settings import results_dir
from headlib.train.machine import machine
from headlib.train import load_model, run_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default="en-fr")
    ap.add_argument("--sentences", type=int, default=500)
    ap.add_argument("--json", help="write the results here (atomically)")
    args = ap.parse_args(argv)

    cfg = get_config("cpu", pair=args.pair)
    committed_dir = results_dir("cpu", args.pair, cfg.train.seed)
    committed = json.loads((committed_dir / "training_results.json").read_text())
    mine_path = run_dir(cfg) / "results.json"
    if not mine_path.is_file():
        print(f"error: no finished run here ({mine_path}); train it first: "
              f"python -m headlib train --profile cpu --pair {args.pair}", file=sys.stderr)
        return 1
    mine = json.loads(mine_path.read_text())

    dev = [{"step": a["step"], "committed": a["dev_bleu"], "here": b["dev_bleu"]}
           for a, b in zip(committed["history"], mine["history"])]
    test = {f"{name} {way}": {"committed": committed["test"][name][way]["bleu"], "here": mine["test"][name][way]["bleu"]}
            for name in committed["test"] for way in ("greedy", "beam")}

    model, bpe, _ = load_model(run_dir(cfg) / "final.pt")
    sentences = analysis_sentences(args.pair, args.sentences)
    relevance, _ = head_relevance(model, bpe, sentences, "conservative")
    here = importance_table(relevance, confidence(encoder_attention(model, bpe, sentences), "exclude-both"))
    then = pd.read_csv(committed_dir / "head_importance.csv")
    top = lambda t: t.loc[t.groupby("layer")["relevance"].idxmax(), "head"].tolist()  # noqa: E731
    heads = {"spearman_relevance": float(spearmanr(here["relevance"], then["relevance"]).statistic),
             "spearman_confidence": float(spearmanr(here["confidence"], then["confidence"]).statistic),
             "top_head_per_layer_here": top(here), "top_head_per_layer_committed": top(then),
             "layers_with_the_same_top_head": sum(a == b for a, b in zip(top(here), top(then)))}

    result = {"pair": args.pair, "run": run_dir(cfg).name, "steps": mine["steps"],
              "machine_here": mine.get("machine", machine()), "machine_committed": committed.get("machine"),
              "dev_bleu": dev, "test_bleu": test, "sentences": len(sentences), "heads": heads}
    print(json.dumps(result, indent=1))
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
