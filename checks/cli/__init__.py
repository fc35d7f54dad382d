"""The ``rnngap`` command line: the parser, ``verify`` and one ``cmd_*`` module per further command."""
