"""The catalogue: one record per construction, with its task, declarations, plans and sizes.

``records`` lists the constructions; ``asymptotics`` checks their declared
resources symbolically.
"""
