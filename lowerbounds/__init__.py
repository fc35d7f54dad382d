"""The executable lower bounds: exact one-way communication complexity, the reductions from Index, fooling pairs.

``cc`` computes the exact deterministic one-way CC of a task by enumeration,
``reductions`` splits the hard instances between Alice and Bob, ``witness``
finds concrete failures of bounded-memory RNNs and ``targets_toy`` holds toy
RNNs of declared memory to test them on.
"""
