"""The checks: tasks, the catalogue, ``rnngap verify``, ``rnngap certify`` and the command line.

Sub-packages, each one subsystem: ``tasks`` (generators, references, abstract
instances), ``io`` (errors, inputs, outputs, progress, formats), ``catalog``
(the construction records), ``verify`` (the claim registry, its engines and
checks), ``certify`` (the proofs from the built weights) and ``cli`` (the
commands). The public Python API (``rnngap`` itself) is checks/api.
"""
