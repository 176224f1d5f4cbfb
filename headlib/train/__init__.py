"""Training: the trainer, its schedule, checkpoints and finalization (`trainer`), and the records a
finished run leaves (`records`)."""
