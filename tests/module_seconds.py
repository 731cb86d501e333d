"""Write ``tests/module_seconds.json`` from a JUnit XML report of a full test run.

    python -m pytest -n 2 --dist loadfile --junitxml=run.xml
    python tests/module_seconds.py run.xml

``tests/conftest.py`` starts the modules with the most recorded seconds first.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

#: Modules under this many seconds are left out (the marker guess orders them).
MIN_SECONDS = 5.0


def module_seconds(report: Path) -> dict[str, int]:
    """Seconds per test module (``tests/x/test_y.py``), from a JUnit XML report.

    Parameters
    ----------
    report : Path
        The ``--junitxml`` file of a run.

    Returns
    -------
    seconds : dict of str to int
        Module path -> rounded seconds, longest first, modules of :data:`MIN_SECONDS` or
        more only.
    """
    total: Counter[str] = Counter()
    for case in ET.parse(report).iter("testcase"):
        parts = case.get("classname", "").split(".")
        modules = [i for i, part in enumerate(parts) if part.startswith("test_")]
        if not modules:
            continue
        total["/".join(parts[: modules[-1] + 1]) + ".py"] += float(case.get("time", 0.0))
    return {name: round(s) for name, s in total.most_common() if s >= MIN_SECONDS}


if __name__ == "__main__":
    out = Path(__file__).with_name("module_seconds.json")
    out.write_text(json.dumps(module_seconds(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {out}")
