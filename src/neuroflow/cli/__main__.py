"""``python -m neuroflow.cli``: the ``neuroflow`` command."""

from neuroflow.cli import main

raise SystemExit(main())
