"""What heads do and how much they matter (Sec. 4-5 and follow-ups): confidence and head functions
(`heads`), LRP relevance (`lrp`), gradient importance (`importance`), single-head ablation
(`ablation`), attention rollout (`rollout`), inference-time interventions (`interventions`),
input deletion (`deletion`) and the head view (`headview`)."""
