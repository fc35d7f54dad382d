"""Builder mutants for the certificate tests: one head's arguments changed.

Used by tests/test_certify_dfs.py, tests/test_certify_istree.py and
tests/test_certify_istree_chain.py, which patch a gadget (``match_head``,
``first_max_head``, ``latest_flag_head``, ...) in the builder's module with the
wrapper made here while they build the mutant."""
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


def last_su_copies_r_u_from_prev1(real):
    """A wrapper for ``latest_flag_head``: the head last_su copies r_u from prev1
    (the s_u's own code), not prev2."""
    def patched(name, flag, pos, one, copy, fmt, max_pos):
        if name == "last_su":
            copy = {**copy, "latest_ru": {"prev1": 1}}
        return real(name, flag, pos, one, copy, fmt, max_pos)
    return patched
