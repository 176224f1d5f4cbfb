"""Frozen, typed configuration and the named profiles.

A `Config` is three small dataclasses (model, data, train). Profiles are named configs, not
edited copies: `smoke` (tiny, the whole pipeline in seconds), `cpu` (the default study on
2 CPU cores) and `base` (the paper's Transformer-base, for GPUs). Any field can be overridden
by key, e.g. ``--set train.lr=5e-4``; an unknown key or a bad value is an error that lists the
valid keys.

Defaults cite the section of Voita et al. (2019) they come from; deviations say why.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from dataclasses import dataclass, field, fields, replace

from headlib.data.corpora import ENRU_DOMAINS, PAIRS, DataError, local_pair_dir
from headlib.nn.masks import spec_rows


@dataclass(frozen=True)
class ModelConfig:
    d_model: int = 512            # Transformer-base (Sec. 3, App. B)
    n_heads: int = 8              # 8 heads x 6 layers = the paper's 48 encoder heads
    d_ff: int = 2048              # Transformer-base
    enc_layers: int = 6
    dec_layers: int = 6
    dropout: float = 0.1          # Transformer-base
    attn_dropout: float = 0.0
    norm: str = "post"            # "post" (paper, Transformer-base) or "pre"
    activation: str = "relu"      # "relu" (paper) or "swish" (Marian / opus-mt)
    tied_embeddings: bool = True  # joint BPE -> one embedding for source, target and output
    max_positions: int = 1024
    positions: str = "interleaved"  # sinusoid layout: "interleaved" (Vaswani et al.) or "halves" (Marian)
    dropout_masks: str = "int16"  # "int16" (four masks per 64-bit draw, p rounded to 1/65536) or "float32" (torch.rand)
    # Heads fixed to 0 for the whole run, e.g. "enc-self:11000000/.../00000001,dec-enc:..."
    # (one 0/1 string per layer); the "from scratch" baseline of Sec. 6 / Table 2. Empty = all on.
    head_mask: str = ""

    def layer_counts(self) -> dict[str, int]:
        """Layers of each attention kind."""
        return {"enc-self": self.enc_layers, "dec-self": self.dec_layers, "dec-enc": self.dec_layers}


@dataclass(frozen=True)
class DataConfig:
    pair: str = "en-de"           # en-de, en-fr (Multi30k), en-ru (the pool), en-ru.news / en-ru.tatoeba (its domains)
    bpe_vocab: int = 32000        # ~32k BPE (App. B.1); joint source+target here
    max_len: int = 128            # training pairs longer than this (BPE pieces) are dropped
    train_limit: int = 0          # use only the first N training pairs (0 = all)
    dev_limit: int = 0            # evaluate on the first N dev pairs (0 = all)
    test_limit: int = 0           # score the first N pairs of each test set (0 = all)


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 1
    max_tokens: int = 4096        # target tokens per micro-batch (padded)
    accum: int = 1                # micro-batches per update
    lr: float = 1e-3              # peak learning rate of the schedule
    warmup: int = 4000            # linear warmup steps (official scripts: 16000)
    schedule: str = "linear"      # "linear": after warmup, linear decay to 0 at max_steps (the budget is known:
                                  # Li et al. 2020); "inverse_sqrt": lr * sqrt(warmup / step) (App. B.3)
    betas: tuple[float, float] = (0.9, 0.98)  # Adam (App. B.3)
    adam_eps: float = 1e-9                    # Adam (App. B.3)
    label_smoothing: float = 0.1  # App. B.3
    clip_norm: float = 1.0
    max_steps: int = 100_000
    max_minutes: float = 0.0      # a user's wall-clock cap on the training loop (0 = none; no profile uses it:
                                  # a clock makes the model depend on the machine)
    eval_every: int = 1000        # updates between dev evaluations (greedy BLEU)
    save_every: int = 0           # updates between `last` checkpoints (0 = at each eval)
    patience: int = 10            # evaluations without a new best dev BLEU before stopping
    average_last: int = 5         # average the last N evaluated checkpoints (0/1 = off)
    bf16: bool = False            # bf16 autocast (GPUs: the base profile). The CPU profiles train in fp32 on every
                                  # machine, one precision so one model: bf16 is 1.9x faster with AMX, 12% slower
                                  # with AVX512-BF16 alone, 39x slower with AVX2 only (README, "Precision")
    threads: int = 0              # torch threads (0 = all cores)
    beam: int = 4                 # beam size for test BLEU
    len_alpha: float = 1.0        # length normalisation: score / len**alpha
    tune_len_alpha: tuple[float, ...] = (0.6, 1.0, 1.4)  # alphas tried on dev after training
    fused_loss: bool = True       # output projection + cross-entropy fused, chunk by chunk (headlib.nn.loss): the
                                  # same function as the reference, faster on CPU
    head_stats_sentences: int = 500  # encoder-head statistics at each dev evaluation, on the first N dev
                                     # sentences (Sec. 5, heads over training; 0 = off)


SPEED_ONLY = ("train.threads",)   # config keys that change speed, not results: not in a run's cache key


@dataclass(frozen=True)
class Config:
    profile: str = "cpu"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Config:
        """The config `to_dict` wrote (e.g. a run record's "config", where JSON made tuples lists)."""
        def section(kind, values):
            unknown = set(values) - {f.name for f in dataclasses.fields(kind)}
            if unknown:
                raise ValueError(f"{kind.__name__} has no {', '.join(sorted(unknown))}: a config of another "
                                 f"headlib version")
            return kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
        return cls(profile=d["profile"], model=section(ModelConfig, d["model"]), data=section(DataConfig, d["data"]),
                   train=section(TrainConfig, d["train"]))

    def digest(self, extra: str = "") -> str:
        """Short hash of the config (and `extra`, e.g. the results version) for cache keys,
        without the `SPEED_ONLY` keys."""
        d = self.to_dict()
        for key in SPEED_ONLY:
            section, name = key.split(".")
            d[section].pop(name)
        blob = json.dumps(d, sort_keys=True) + extra
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


PROFILES: dict[str, Config] = {
    # Every code path in seconds: 2+2 layers, 4 heads, 500 training pairs.
    "smoke": Config(
        profile="smoke",
        model=ModelConfig(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2,
                          dropout=0.1, norm="pre"),
        data=DataConfig(bpe_vocab=500, train_limit=500, dev_limit=40, max_len=64),
        train=TrainConfig(max_tokens=1024, lr=3e-3, warmup=20, max_steps=30, eval_every=15,
                          patience=5, average_last=2, beam=2, tune_len_alpha=(1.0,)),
    ),
    # The default study: 6+6 layers x 8 heads keeps the paper's 48 encoder heads; the width is
    # halved so that training fits on 2 cores. A recipe of updates, not minutes, so that every
    # machine trains the same model (up to kernel rounding): 2,800 updates of 2,048-token batches,
    # lr 2e-3 after 800 warmup updates decayed linearly to 0 at the last (Li et al. 2020), fp32.
    # 83 minutes on a 2-core AVX2-only EPYC (1,035 tok/s fp32, evaluations included), about 67 on an
    # AVX512-BF16 one. Pre-LN, chosen on dev at equal updates over post-LN with a recipe of its own (lr 1e-3,
    # warmup 1,400): 35.42 against 15.39 dev BLEU at update 2,800 (the pre-LN run then was d3647e23475a;
    # Sec. 3 shows the committed pair, stats.NORM_RUNS). Frozen: a change is a new study generation.
    "cpu": Config(
        profile="cpu",
        model=ModelConfig(d_model=256, n_heads=8, d_ff=1024, dropout=0.2, norm="pre"),
        data=DataConfig(bpe_vocab=8000, max_len=100, dev_limit=1000),  # dev BLEU in seconds
        train=TrainConfig(max_tokens=2048, lr=2e-3, warmup=800, max_steps=2800, eval_every=400,
                          patience=8, average_last=3),
    ),
    # The paper's Transformer-base (Sec. 3, App. B) for GPUs: ~16k tokens per batch (4 x 4096
    # target tokens here; the paper counts ~16k source tokens), the official schedule
    # 4.0 * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) peaks at 4 / sqrt(512 * 16000) = 1.4e-3.
    "base": Config(
        profile="base",
        model=ModelConfig(),
        data=DataConfig(bpe_vocab=32000, max_len=128),
        train=TrainConfig(max_tokens=4096, accum=4, lr=1.4e-3, warmup=16000, schedule="inverse_sqrt",
                          eval_every=2000, bf16=True),
    ),
    # An opus-mt model imported instead of trained (headlib.train.pretrained): Marian's Transformer-base
    # (post-LN, swish, sinusoids as sines then cosines); the model section is the import's, the rest
    # says how it is scored (beam 4, length penalty chosen on dev) and, for Sec. 6, fine-tuned.
    "pretrained": Config(
        profile="pretrained",
        model=ModelConfig(activation="swish", positions="halves", max_positions=512),
        data=DataConfig(max_len=128, dev_limit=1000),
        train=TrainConfig(max_tokens=4096, beam=4),
    ),
}


def _valid_keys() -> list[str]:
    keys = []
    for section in ("model", "data", "train"):
        cls = typing.get_type_hints(Config)[section]
        keys += [f"{section}.{f.name}" for f in fields(cls)]
    return keys


def _parse_value(key: str, raw: str, typ):
    origin = typing.get_origin(typ)
    try:
        if typ is bool:
            if raw.lower() in ("1", "true", "yes"):
                return True
            if raw.lower() in ("0", "false", "no"):
                return False
            raise ValueError(raw)
        if origin is tuple:
            args = typing.get_args(typ)
            inner = args[0]
            parts = [p for p in raw.strip("()[] ").split(",") if p.strip()]
            return tuple(inner(p.strip()) for p in parts)
        return typ(raw)
    except (TypeError, ValueError):
        raise ValueError(f"bad value {raw!r} for {key} (expected {getattr(typ, '__name__', typ)})") from None


def get_config(profile: str = "cpu", overrides: typing.Iterable[str] = (), **pair) -> Config:
    """The named profile with `key=value` overrides applied (e.g. ``train.lr=5e-4``)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    cfg = PROFILES[profile]
    if pair.get("pair"):
        cfg = replace(cfg, data=replace(cfg.data, pair=pair["pair"]))
    hints = typing.get_type_hints(Config)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value; valid keys: {', '.join(_valid_keys())}")
        key, raw = item.split("=", 1)
        section, _, name = key.strip().partition(".")
        sub_cls = hints.get(section)
        sub_fields = {f.name: f for f in fields(sub_cls)} if dataclasses.is_dataclass(sub_cls) else {}
        if name not in sub_fields:
            raise ValueError(f"unknown config key {key!r}; valid keys: {', '.join(_valid_keys())}")
        typ = typing.get_type_hints(sub_cls)[name]
        value = _parse_value(key, raw.strip(), typ)
        cfg = replace(cfg, **{section: replace(getattr(cfg, section), **{name: value})})
    validate(cfg)
    return cfg


def validate(cfg: Config) -> None:
    m = cfg.model
    if m.d_model % m.n_heads:
        raise ValueError(f"model.d_model ({m.d_model}) must be divisible by model.n_heads ({m.n_heads})")
    if m.norm not in ("pre", "post"):
        raise ValueError(f"model.norm must be 'pre' or 'post', got {m.norm!r}")
    if m.positions not in ("interleaved", "halves"):
        raise ValueError(f"model.positions must be 'interleaved' or 'halves', got {m.positions!r}")
    if cfg.train.schedule not in ("inverse_sqrt", "linear"):
        raise ValueError(f"train.schedule must be 'inverse_sqrt' or 'linear', got {cfg.train.schedule!r}")
    if m.activation not in ("relu", "swish"):
        raise ValueError(f"model.activation must be 'relu' or 'swish', got {m.activation!r}")
    if m.head_mask:
        spec_rows(m.head_mask, m.layer_counts(), m.n_heads)
    if cfg.data.pair not in PAIRS and cfg.data.pair not in ENRU_DOMAINS:
        try:
            local_pair_dir(cfg.data.pair)
        except DataError as e:
            raise ValueError(f"data.pair: {e}") from None
    for name in ("max_tokens", "accum", "max_steps", "eval_every"):
        if getattr(cfg.train, name) <= 0:
            raise ValueError(f"train.{name} must be positive, got {getattr(cfg.train, name)}")
