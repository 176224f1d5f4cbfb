"""Pruning heads (Sec. 6 and follow-ups): Hard Concrete gates (`gates`), gate fine-tuning and DSP
(`prune`), fixed head subsets (`subset`), physically smaller models (`shrink`), the sweeps and
continuation paths behind the pages (`points`; their command line: `python -m headlib.pruning`), the
pages' tables and verdicts on them (`readout`), lottery tickets (`lottery`)."""
