"""A profile: everything one named setting of the study uses, in one object.

    config    the model, data and training recipe (`headlib.config.Config`, `PROFILES`)
    grids     what the pages sweep and how many sentences they read (`Grids`)
    prune     Sec. 6's gated fine-tuning (`PruneConfig`)
    lottery   the lottery ticket (`LotteryConfig`)
    adapt     head-restricted adaptation (`AdaptConfig`)
    domains   the domains study (`DomainConfig`)

`profile(name)` gives one; ``python -m headlib grids --profile cpu`` prints it as JSON. Only the
config is part of a run's cache key; a page's or study's point is keyed by its own values.
Defaults cite the section of Voita et al. (2019) or the follow-up they come from.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from headlib.config import PROFILES, Config


@dataclass(frozen=True)
class Grids:
    """A profile's experiment grids: what the Sec. 6 pages sweep. Not part of a run's config (nor
    of its digest): a grid says which points a page computes, each point is keyed by its own
    values. The GPU scripts read them too (`python -m headlib grids --profile cpu --key lambdas_encoder`)."""
    # Sec. 6's lambda grids, chosen on dev before the points (the paper publishes none): the
    # encoder's self-attention with the decoder frozen (Sec. 6.2), and all three kinds (Sec. 6.3).
    lambdas_encoder: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.007, 0.01, 0.02, 0.05,
                                          0.1, 0.2, 0.5)
    lambdas_all: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
    # Heads of the pruned points trained from scratch with their masks (Table 2's "from scratch"), the nearest
    # path point to each: the encoder at about 10 and 4 heads (Sec. 6.2's range), all attention near two of Table
    # 2's WMT configurations (12/21/25 = 58 and 5/9/12 = 26 heads).
    scratch_heads_encoder: tuple[int, ...] = (10, 4)
    scratch_heads_all: tuple[int, ...] = (60, 26)
    finetune_steps: int = 500       # one independent fine-tuning (the path spends a fifth per lambda)
    path_share: int = 5             # protocol v2, item 3: the path costs a fifth of independent fine-tunings
    validation_points: int = 3      # independent fine-tunings that check the path (item 3: at least 3)
    # Beyond the paper (Michel et al., DSP, Budhraja et al.): encoder heads kept by the fine-tuned
    # methods (the head counts the Sec. 6.2 sweep produced), those where DSP also runs with the
    # gates' logit rate, random masks per head count, and the step of the ablation curve (48 .. 0).
    method_heads: tuple[int, ...] = (3, 10, 12, 17, 24, 40)
    dsp_lr_heads: tuple[int, ...] = (3, 12, 24)
    random_masks: int = 3
    ablation_step: int = 6
    # How many sentences each page analyses (its size, not its recipe).
    importance_sentences: int = 500     # Sec. 4: held-out sentences for confidence and LRP
    function_sentences: int = 2000      # Sec. 5: held-out sentences for positional and rare-word heads
    gold_sentences: int = 0             # Sec. 5: UD English EWT sentences for gold vs spaCy parses (0 = all)
    gradient_dev: int = 500             # Beyond: dev pairs for Michel et al.'s gradient importance
    around_dev: int = 500               # Around: dev pairs scored by greedy BLEU
    constant_train: int = 5000          # Around: training sentences averaged into constant patterns
    typed_maps: int = 200               # Around: dev pairs whose attention maps are typed
    explain_sentences: int = 300        # Around: dev sentences for rollout vs LRP
    ntrex_sentences: int = 500          # Around: NTREX sentences per target language
    lottery_heads: int = 12             # Around: encoder heads the lottery ticket keeps
    compare_pairs: tuple[str, ...] = ("en-de", "en-fr")   # Around: models compared on the same English sentences
    # The study's units, "pair/seed": each a release and its pages (the Claims page lists those not done).
    units: tuple[str, ...] = ("en-de/1", "en-de/2", "en-de/3", "en-fr/1", "en-ru/1")

    def lambdas(self, setting: str) -> tuple[float, ...]:
        return {"encoder": self.lambdas_encoder, "all": self.lambdas_all}[setting]

    def scratch_heads(self, setting: str) -> tuple[int, ...]:
        return {"encoder": self.scratch_heads_encoder, "all": self.scratch_heads_all}[setting]


@dataclass(frozen=True)
class PruneConfig:
    kinds: tuple[str, ...] = ("enc-self",)
    lam: float = 0.01          # lambda of the expected-L0 penalty (paper scaling: sum over heads)
    steps: int = 500           # fine-tuning updates (the paper does not publish its step counts)
    lr: float = 1e-4           # model parameters (constant; the model has converged)
    gate_lr: float = 0.02      # log_alpha (our choice: gates must be able to close within `steps`)
    max_tokens: int = 2048     # target tokens per update: the cpu recipe's train.max_tokens, so that a pruned model's
                               # budget and a from-scratch run's match in tokens per update as in updates (Table 2)
    seed: int = 1
    bf16: bool = False         # fp32, as the cpu profile trains (bf16 autocast pays only with AMX or on GPUs)
    label_smoothing: float = 0.1
    method: str = "hard-concrete"   # or "dsp" (exactly k heads) or "fixed" (the mask `mask`)
    k: int = 0                 # dsp: heads kept over the gated kinds
    tau: tuple[float, float] = (0.1, 1e-3)   # dsp: temperature, annealed log-linearly (DSP: 0.1 -> 1e-8 over 15k steps)
    logit_lr: float = 0.2      # dsp: the head logits (our choice: at gate_lr's 0.02 they stay within the Gumbel
                               # noise over 500 updates, `subset.subset_overlap`; the Beyond page shows both)
    mask: str = ""             # fixed: the head mask, as model.head_mask
    label: str = ""            # fixed: how the mask was chosen (names the sweep point)
    fast_kernels: bool = True  # fused loss (headlib.nn.loss) and int16 dropout masks: the same fine-tuning, other
                               # rounding and dropout draws, faster on CPU (benchmarks/train_throughput.py; points
                               # written before this field existed, without it in their prune_config, did not use them)


@dataclass(frozen=True)
class LotteryConfig:
    k: int = 12                      # encoder heads kept (Hard Concrete's 12-head point, Sec. 6.2)
    prune_fraction: float = 0.25     # prune after this fraction of the baseline's updates
    rewind_fraction: float = 0.04    # rewind to this fraction ("late resetting")
    n_confidence: int = 500          # dev sentences for head confidence
    eos_mode: str = "exclude-both"   # as in Sec. 4

    def updates(self, total: int) -> tuple[int, int]:
        """(prune_at, rewind_to) for a baseline of `total` updates."""
        prune_at, rewind_to = max(round(self.prune_fraction * total), 1), round(self.rewind_fraction * total)
        if not 0 <= rewind_to < prune_at <= total:
            raise ValueError(f"LotteryConfig: need 0 <= rewind_fraction < prune_fraction <= 1, got "
                             f"{self.rewind_fraction} and {self.prune_fraction}")
        return prune_at, rewind_to


@dataclass(frozen=True)
class AdaptConfig:
    steps: int = 200              # fine-tuning updates, the same for every way (the chapter's time budget)
    lr: float = 3e-4              # constant (the model has converged on its own domain)
    k: int = 14                   # heads updated by `alps` and `random`: 10% of 144 (ALPS)
    max_tokens: int = 4096
    seed: int = 1
    bf16: bool = False            # fp32, as the cpu profile trains (bf16 autocast pays only with AMX or on GPUs)
    label_smoothing: float = 0.1


@dataclass(frozen=True)
class DomainConfig:
    updates: int = 1200             # training updates of each domain model
    n_functions: int = 2000         # held-out sentences for Sec. 5 (and confidence)
    n_lrp: int = 300                # of these, the first n for LRP relevance (Sec. 4)
    eos_mode: str = "exclude-both"
    margin: float = 0.10            # a syntactic head beats the positional baseline by this much
    test_limit: int = 0             # score the first N pairs of each test set after training (0 = all)
    n_target: int = 0               # held-out Tatoeba sentences scored after adaptation (0 = all 1,000)
    n_forgetting: int = 500         # newstest2019-2020 sentences scored after adaptation
    random_seeds: tuple[int, ...] = (1, 2, 3)   # draws of random heads
    adapt: AdaptConfig = field(default_factory=AdaptConfig)

    def overrides(self) -> tuple[str, ...]:
        return (f"train.max_steps={self.updates}", "train.max_minutes=0", f"data.test_limit={self.test_limit}")


@dataclass(frozen=True)
class Profile:
    config: Config
    grids: Grids
    prune: PruneConfig = field(default_factory=PruneConfig)
    lottery: LotteryConfig = field(default_factory=LotteryConfig)
    adapt: AdaptConfig = field(default_factory=AdaptConfig)
    domains: DomainConfig = field(default_factory=DomainConfig)

    @property
    def name(self) -> str:
        return self.config.profile

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _profiles() -> dict[str, Profile]:
    smoke_grids = Grids(lambdas_encoder=(0.01, 1.0), lambdas_all=(0.5,), scratch_heads_encoder=(2,),
                        scratch_heads_all=(12,), finetune_steps=10, method_heads=(2,), dsp_lr_heads=(2,),
                        ablation_step=4, importance_sentences=50, function_sentences=100, gold_sentences=200,
                        gradient_dev=20, around_dev=20, constant_train=50, typed_maps=5, explain_sentences=5,
                        ntrex_sentences=10, lottery_heads=3, units=("en-de/1",))
    smoke_domains = DomainConfig(updates=20, test_limit=20, n_functions=30, n_lrp=6, n_target=20, n_forgetting=10,
                                 random_seeds=(1,), adapt=AdaptConfig(steps=3, k=3, max_tokens=512))
    return {"smoke": Profile(PROFILES["smoke"], smoke_grids, domains=smoke_domains),   # every code path in minutes
            **{name: Profile(PROFILES[name], Grids()) for name in ("cpu", "base", "pretrained")}}


def profile(name: str) -> Profile:
    """The named profile (`PROFILES`' configs with their grids and study settings)."""
    profiles = _profiles()
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; valid profiles: {', '.join(profiles)}")
    return profiles[name]


def grids(name: str) -> Grids:
    """The experiment grids of a profile."""
    return profile(name).grids
