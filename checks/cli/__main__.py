"""``python -m rnngap.checks.cli``: the command line, as the ``rnngap`` script runs it."""
from .main import main

raise SystemExit(main())
