"""The hand-wired models of every claim, their declared bounds and their proof obligations.

One module per family (retrieval Transformers, hybrids, IsTree, the simulator,
the CoT hierarchy, Turing machines, RAG models, lower-bound targets, gadget demos);
``bounds`` declares every resource once and ``obligations`` states what a
certificate proves about them.
"""
