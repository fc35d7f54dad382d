"""``rnngap certify``: proofs from the built weights, the machine lemmas and the declared obligations.

``interpreter`` reads a built model's layers as formulas over every instance;
``plans`` says what each head does; ``run`` runs every certificate and makes
its records. docs/certify.md says what is proved.
"""
