"""The Around-the-paper verdicts follow their written criteria on hand-built result tables."""
import pandas as pd

from headlib.around import studies_table


def write(out, name, rows):
    pd.DataFrame(rows).to_csv(out / name, index=False)


def test_verdicts_follow_the_criteria(tmp_path):
    news = tmp_path / "cpu" / "en-ru.news" / "seed1"        # A7 reads the en-ru news model's folder
    tmp_path = tmp_path / "cpu" / "en-de" / "seed1"
    for d in (news, tmp_path):
        d.mkdir(parents=True)
    write(tmp_path, "single_head_ablation.csv", [
        {"kind": "enc-self", "layer": 1, "head": 1, "BLEU": 30.0, "change": -0.5},
        {"kind": "dec-enc", "layer": 2, "head": 3, "BLEU": 30.9, "change": 0.4}])
    write(tmp_path, "constant_attention.csv", [
        {"what": "head", "layer": 1, "head": 1, "heads": 1, "BLEU": 30.0, "change": -0.1},
        {"what": "head", "layer": 1, "head": 2, "heads": 1, "BLEU": 29.0, "change": -1.1},
        {"what": "all", "layer": 0, "head": 0, "heads": 2, "BLEU": 20.0, "change": -10.0}])   # 33% lost
    write(tmp_path, "attention_sparsity.csv", [
        {"threshold": 0.0, "BLEU": 30.0, "zeroed": 0.0}, {"threshold": 0.1, "BLEU": 29.8, "zeroed": 0.85},
        {"threshold": 0.3, "BLEU": 20.0, "zeroed": 0.99}])
    write(tmp_path, "attention_quantization.csv", [{"bits": 3, "BLEU": 25.0, "zeroed": 0.5}])
    write(tmp_path, "rollout.csv", [{"tokens": 5, "LRP vs local": 0.1 * i, "LRP vs rollout": 0.1 * i + 0.3,
                                    "local vs rollout": 0.5} for i in range(8)])
    write(tmp_path, "crosslingual_agreement.csv", [
        {"level": "heads across pairs", "a": "en-de", "b": "en-fr", "rho": 0.3},
        {"level": "layer top share", "a": "en-de", "b": "en-fr", "rho": 0.1},
        {"level": "heads, ntrex vs own test set", "a": "x", "b": "y", "rho": 0.9}])
    write(tmp_path, "refined_lrp.csv", [{"sentence": i, "ordering": o, "area": a + 0.01 * i}
                                        for i in range(8) for o, a in (("plain LRP", -2.0), ("refined LRP", -1.9),
                                                                      ("random", -1.5))])
    write(tmp_path, "lottery.csv", [
        {"method": "unpruned", "encoder heads": 48, "updates": 2401, "BLEU": 34.9, "encoder speed-up": 1.0},
        {"method": "lottery ticket", "encoder heads": 12, "updates": 2905, "BLEU": 34.3, "encoder speed-up": 1.3}])
    write(news, "adaptation.csv", [
        {"way": "none", "heads": 0, "updated share": 0.0, "tatoeba": 1.0},
        {"way": "all", "heads": "all", "updated share": 1.0, "tatoeba": 10.0},
        {"way": "alps-k14", "heads": 14, "updated share": 0.04, "tatoeba": 6.0},
        {"way": "random-k14-s1", "heads": 14, "updated share": 0.04, "tatoeba": 3.0},
        {"way": "random-k14-s2", "heads": 14, "updated share": 0.04, "tatoeba": 5.5}])
    verdicts = studies_table(tmp_path).set_index("claim")["verdict"].to_dict()
    assert verdicts == {"A1": "holds",            # worst -0.5 > -1, one head improves by 0.4
                        "A2": "partly",           # all constant loses 33%; 1 of 2 heads < 0.5 lost
                        "A3": "partly",           # 85% zeroed within 1%; 3 bits loses 17%
                        "A4": "holds",            # rollout ahead on every sentence
                        "A5": "partly",           # head rho 0.3 > 0.2
                        "A6": "partly",           # -0.6 BLEU (> 0.5 lost), 1.3x faster
                        "A7": "partly",           # 56% of the gain (< 90%), beats both random draws
                        "A8": "does not hold"}    # refined curve higher (worse) than plain
    write(news, "adaptation.csv", [                  # above the random draws' mean, below the best one
        {"way": "none", "heads": 0, "updated share": 0.0, "tatoeba": 1.0},
        {"way": "all", "heads": "all", "updated share": 1.0, "tatoeba": 10.0},
        {"way": "alps-k14", "heads": 14, "updated share": 0.04, "tatoeba": 6.0},
        {"way": "random-k14-s1", "heads": 14, "updated share": 0.04, "tatoeba": 3.0},
        {"way": "random-k14-s2", "heads": 14, "updated share": 0.04, "tatoeba": 6.5}])
    assert studies_table(tmp_path).set_index("claim").loc["A7", "verdict"] == "does not hold"
