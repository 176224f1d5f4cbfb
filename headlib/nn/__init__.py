"""The network: the Transformer with a gate on every attention head (`model`), its loss (`loss`),
greedy and beam decoding (`decode`), and the import of Marian / opus-mt models (`hub`)."""
