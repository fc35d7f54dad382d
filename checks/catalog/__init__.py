"""The catalogue: one record per construction, with its certified forms, plans and declared resources.

``schema`` says what a record holds; each family's module (``gadgets``,
``retrieval``, ``istree``, ``hybrid``, ``rag``, ``hierarchy``, ``turing``) makes
its records; ``records`` lists them all and answers the lookups;
``asymptotics`` checks the declared resources symbolically.
"""
