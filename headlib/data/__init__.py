"""The data: corpora and their splits (`corpora`), joint BPE (`bpe`), token-budget batches (`batching`)."""
