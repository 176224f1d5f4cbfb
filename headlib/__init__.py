"""headlib: a reproducible study of Voita et al. (2019), "Analyzing Multi-Head Self-Attention:
Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned" (ACL 2019)."""
__version__ = "0.1.0"
