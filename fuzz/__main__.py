"""``python -m fuzz``: the ``resumefuzz`` command, for checkouts without the console script."""

from .cli import main

raise SystemExit(main())
