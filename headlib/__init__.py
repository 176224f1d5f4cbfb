"""headlib: a reproducible study of Voita et al. (2019), "Analyzing Multi-Head Self-Attention:
Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned" (ACL 2019)."""
__version__ = "0.1.0"
# Part of every run's cache key (with its config): bump it when a code change changes numbers, so
# that cached runs are retrained. Not the package version, which changes for other reasons.
RESULTS_VERSION = 2
