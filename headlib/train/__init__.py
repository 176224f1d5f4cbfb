"""Training: the one fine-tuning loop every update goes through (`loop`), a config's data ready
for it (`prepared`), a run's directory and model (`runs`), the trainer with its schedule,
checkpoints and finalization (`trainer`), released models (`release`) and the records a finished
run leaves (`records`).

The names below are the package's API; modules outside `headlib.train` import them from here,
never from `headlib.train.trainer` (tests/test_imports.py).
"""
from headlib.train.loop import Done, Update, fine_tune, one_batch_updates
from headlib.train.prepared import Prepared, encode_corpus, prepare_data
from headlib.train.runs import initial_model, load_model, model_tokenizer, run_dir, run_tokenizer
from headlib.train.trainer import Trainer, finalize, start_from, train, trained_model

__all__ = ["Done", "Prepared", "Trainer", "Update", "encode_corpus", "finalize", "fine_tune", "initial_model",
           "load_model", "model_tokenizer", "one_batch_updates", "prepare_data", "run_dir", "run_tokenizer",
           "start_from", "train", "trained_model"]
