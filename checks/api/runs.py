"""``rnngap.verify``, ``rnngap.certify`` and ``rnngap.export``: what the commands print and write.

    >>> import rnngap
    >>> rec = rnngap.certify("index-transformer[a=2]")[0]
    >>> rec["certified"], rec["source"]                  
    (True, 'built-model')

Both take the names the commands take (claim ids, construction names,
certificate names) and return a list of dicts, the objects their ``--json``
writes. Unknown names raise ValueError naming the closest.
"""
from __future__ import annotations

from typing import Iterable

# Lazy imports: each function imports the verify, certify and export machinery when
# first called, so that `import rnngap` stays light.


def _names(only) -> list[str] | None:
    if only is None:
        return None
    return [only] if isinstance(only, str) else list(only)


def verify(only: str | Iterable[str] | None = None, profile: str = "quick", seed: int = 0) -> list[dict]:
    """Run the claim checks (serially, in this process) and return their records.
    ``only``: claim ids or construction names, as ``rnngap verify --only``."""
    from rnngap.checks.verify import registry
    from rnngap.checks.io.errors import UsageError
    from rnngap.checks.verify.select import select
    names = _names(only)
    try:
        claims, keep = select(names) if names else (None, None)
    except UsageError as e:
        raise ValueError(str(e)) from None
    records = registry.run(profile, claims, seed)
    return [r.as_json(seed=seed, profile=profile) for r in records if keep is None or keep(r)]


def certify(only: str | Iterable[str] | None = None, full: bool = False, workers: int = 1,
            engine: str = "local", address: str | None = None) -> list[dict]:
    """Certify (as ``rnngap certify``) and return one record per certificate:
    on ``workers`` local processes, in this process (``engine="serial"``) or on
    Dask (``engine="dask"``: a local cluster of ``workers``, or the scheduler at
    ``address``), with the same records."""
    from rnngap.checks.catalog import records as catalog
    from rnngap.checks.certify.run import certify as run
    from rnngap.checks.cli.cmd_certify import resolve
    from rnngap.checks.io.errors import UsageError
    names = _names(only)
    try:
        chosen = resolve(names, catalog.certificates(), "certify") if names else None
    except UsageError as e:
        raise ValueError(str(e)) from None
    if chosen is not None and not chosen:
        return []
    return [r.record() for r in run(chosen, workers=workers, full=full, every_n=full, engine=engine,
                                    address=address)]


def export(name: str, n: int, to: str, out) -> str:
    """Write the construction ``name`` built at size ``n`` to the file ``out``, as
    ``rnngap export`` does: ``to`` is ``"safetensors"``, ``"torch"`` or
    ``"transformer-lens"`` (docs/export.md). Returns ``out``; ValueError (nothing
    written) for an unknown name, a size the builder refuses, a target that
    cannot hold the model or a folder that does not exist."""
    from rnngap.checks.export.write import export as write
    write(name, n, to, out)
    return str(out)
