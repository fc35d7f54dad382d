"""``rnngap verify``: the claim registry, its engines and every claim's checks.

``registry`` maps claim ids to checks; each ``checks_*`` module registers its
own; ``engine`` runs them serially, on local workers or on dask.
"""
