"""Builder mutants for the certificate tests: one head's arguments changed.

Used by tests/test_certify_dfs.py and tests/test_certify_istree.py, which patch
a gadget (``match_head``, ``first_max_head``, ...) in the builder's module with
the wrapper this returns while they build the mutant."""
from __future__ import annotations


def head_kwargs(head: str, change):
    """A wrapper for a head gadget ``real(name, **kw)``: the head named ``head``
    is built with ``change(kw)``, every other head as it was."""
    def wrap(real):
        def patched(name, **kw):
            if name == head:
                kw = change(dict(kw))
            return real(name, **kw)
        return patched
    return wrap
