"""The Snakemake report of a finished run, opened in headless Chromium as a user would.

Opt-in (``make test-report``, or ``NEUROFLOW_REPORT_TEST=1 pytest
tests/workflow/test_report_browser.py``): it needs the ``report-test`` extra (Playwright) and a
Chromium executable (Debian's ``chromium`` package, ``/usr/bin/chromium``); no browser is
downloaded. The report is opened as a ``file://`` page, every category is reached through the
report's own menu, its results table is compared with the report's embedded JSON, and a
full-page screenshot of each view is saved to ``$NEUROFLOW_REPORT_SCREENSHOTS`` (default: a
pytest temporary folder).
"""

from __future__ import annotations

import html
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from workflow_helpers import report_data, snakemake

#: Flags Chromium needs on a machine without a network, a display or a user namespace.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Safety net for each wait; the report renders in well under a second.
WAIT_MS = 60_000
#: The window the report is read in: its figures must be readable at this width.
VIEWPORT = {"width": 1600, "height": 900}
#: Screenshots taller than this are cut (a very long table still shows its start).
MAX_HEIGHT = 8000
#: A screenshot smaller than this is a blank or broken page.
MIN_SCREENSHOT_BYTES = 10_000


def _chromium() -> str | None:
    path = Path("/usr/bin/chromium")
    return str(path) if path.exists() else shutil.which("chromium")


def _skip_reason() -> str | None:
    if not os.environ.get("NEUROFLOW_REPORT_TEST"):
        return (
            "set NEUROFLOW_REPORT_TEST=1 to run (opens the report of a tiny demo run in "
            "headless Chromium; needs the report-test extra and Debian's chromium; "
            "`make test-report` sets both up)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install -e '.[report-test]'"
    if _chromium() is None:
        return "no chromium executable (/usr/bin/chromium or on PATH): apt-get install chromium"
    return None


_SKIP_REASON = _skip_reason()
pytestmark = [
    pytest.mark.workflow,
    pytest.mark.slow,
    pytest.mark.skipif(_SKIP_REASON is not None, reason=_SKIP_REASON or ""),
]


# --- What the report's JSON says each view must show


@dataclass
class Table:
    """The results table the report draws for one subcategory."""

    headers: list[str]
    rows: set[tuple[str, ...]]
    #: A label with two values that the report turns into a switch instead of a column.
    toggle: str | None = None
    #: Rows without both values of ``toggle``: the report's JavaScript fails on them.
    gaps: list[tuple[str, ...]] = field(default_factory=list)

    def why_it_breaks(self) -> str:
        if not self.gaps:
            return ""
        return (
            f"label {self.toggle!r} has two values, each on half of the entries, so the report "
            f"shows it as a switch; but rows {self.gaps} lack one of its values, and the "
            "report's JavaScript reads an entry that does not exist (results[undefined])"
        )


def expected_table(results: dict, paths: list[str]) -> Table:
    """The table the report draws for ``paths`` (the rules of snakemake's ``AbstractResults``)."""
    entries = [results[p] for p in paths]
    if not all(e.get("labels") is not None for e in entries):  # JavaScript: {} is true
        return Table(["File"], {(p,) for p in paths})
    labels: list[str] = []
    for entry in entries:
        labels += [k for k in entry["labels"] if k not in labels]
    toggles = []
    for label in labels[1:]:
        values = [e["labels"][label] for e in entries if label in e["labels"]]
        unique = set(values)
        if len(unique) == 2 and all(values.count(v) * 2 == len(entries) for v in unique):
            toggles.append(label)
    toggle = toggles[0] if len(toggles) == 1 else None  # the report allows one switch only
    headers = [label for label in labels if label != toggle]
    rows: dict[tuple[str, ...], set] = {}
    for e in entries:
        key = tuple(str(e["labels"].get(h, "")) for h in headers)
        rows.setdefault(key, set()).add(e["labels"].get(toggle))
    gaps = sorted(k for k, v in rows.items() if toggle is not None and len(v) < 2)
    return Table(headers, set(rows), toggle, gaps)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# --- The browser


@dataclass
class ReportPage:
    """A browser tab on the report, with the JavaScript errors it has seen."""

    page: object
    errors: list[str]
    shots: Path

    def assert_no_js_errors(self) -> None:
        assert not self.errors, "JavaScript errors in the report:\n" + "\n".join(self.errors)

    def click(self, locator) -> None:
        locator.wait_for(state="visible")
        locator.click()

    def menu_item(self, text: str):
        """A link of the navigation panel (menu, category or breadcrumb) with exactly ``text``."""
        exact = re.compile(rf"^\s*{re.escape(text)}\s*$")
        return self.page.locator("nav a").filter(has_text=exact).first

    def reload(self) -> None:
        """The report loaded afresh (after its JavaScript failed), errors forgotten."""
        self.page.reload(wait_until="load")
        self.page.locator("nav").first.wait_for()
        self.errors.clear()

    def home(self) -> None:
        """Back to the main menu through the breadcrumb's home icon."""
        self.click(self.page.locator("nav ol li a").first)
        self.menu_item("Statistics").wait_for()  # an entry of the main menu only

    def screenshot(self, name: str) -> Path:
        """A full-page screenshot, the window stretched to show the whole navigation panel."""
        height = self.page.evaluate(
            "Math.max(...Array.from(document.querySelectorAll('nav, #app > div > div'))"
            ".map(n => n.scrollHeight))"
        )
        size = {
            "width": VIEWPORT["width"],
            "height": min(max(VIEWPORT["height"], height + 20), MAX_HEIGHT),
        }
        self.page.set_viewport_size(size)
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.page.set_viewport_size(VIEWPORT)
        return path


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory, tiny_run: Path) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    snakemake(tiny_run, "--report", str(out))
    return out


@pytest.fixture(scope="module")
def report(report_html: Path) -> tuple[dict, dict]:
    return report_data(report_html.read_text())


@pytest.fixture(scope="module")
def shots(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """The screenshot folder, emptied of older screenshots; its path is printed at the end."""
    folder = os.environ.get("NEUROFLOW_REPORT_SCREENSHOTS")
    path = Path(folder).resolve() if folder else tmp_path_factory.mktemp("report-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.png"):
        old.unlink()
    yield path
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():  # printed even when the output is captured
        print(f"\n{len(list(path.glob('*.png')))} report screenshots in {path}")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def tab(browser, report_html: Path, shots: Path) -> Iterator[ReportPage]:
    """The report freshly loaded in a new tab."""
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(f"console: {msg.text}"))
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.goto(report_html.as_uri(), wait_until="load")
    page.locator("nav").first.wait_for()
    try:
        yield ReportPage(page, errors, shots)
    finally:
        page.close()


# --- The tests


def test_report_loads_without_errors(tab, report):
    _, categories = report
    page = tab.page
    assert page.title(), "the report has no title"
    assert not page.locator("#jswarning").is_visible()  # JavaScript ran
    for category in categories:
        assert tab.menu_item(category).is_visible(), f"{category!r} is not in the report's menu"
    assert tab.screenshot("00-menu").stat().st_size > MIN_SCREENSHOT_BYTES
    tab.assert_no_js_errors()


def _check_table(tab: ReportPage, table: Table, where: str) -> int:
    """Compare the results table on screen with ``table``; the number of entries it reaches."""
    page = tab.page
    # The table, or an empty app: React unmounts everything when a component throws.
    page.locator("nav table tbody tr, #app:empty").first.wait_for(state="attached")
    if tab.errors:
        reason = table.why_it_breaks() or "see the errors"
        errors = "; ".join(e.splitlines()[0] for e in tab.errors)  # no stack traces
        raise AssertionError(f"{where}: the report's JavaScript failed ({reason}): {errors}")
    headers = [t.strip() for t in page.locator("nav table thead th").all_text_contents()]
    assert headers[:-1] == table.headers, where  # the last column holds the buttons
    rows = page.locator("nav table tbody tr")
    shown = {
        tuple(t.strip() for t in row.locator("td").all_text_contents()[:-1]) for row in rows.all()
    }
    assert rows.count() == len(table.rows), where
    assert shown == table.rows, where
    if table.toggle is not None:
        switch = page.locator("nav fieldset").filter(has_text=table.toggle)
        assert switch.count() == 1, f"{where}: no switch for {table.toggle!r}"
        return 2 * rows.count()
    return rows.count()


def _visit_category(tab: ReportPage, results: dict, category: str, subcategories: dict) -> None:
    """Open ``category`` from the main menu, check and screenshot each of its tables."""
    n_json = sum(len(paths) for paths in subcategories.values())
    tab.home()
    tab.click(tab.menu_item(category))
    n_shown = 0
    if len(subcategories) == 1:  # the report goes straight to the table
        (paths,) = subcategories.values()
        n_shown += _check_table(tab, expected_table(results, paths), category)
        tab.screenshot(_slug(category))
    else:
        for sub in subcategories:  # first the list of subcategories
            tab.menu_item(sub).wait_for()
        tab.screenshot(_slug(category))
        for sub in sorted(subcategories):
            tab.click(tab.menu_item(sub))
            table = expected_table(results, subcategories[sub])
            n_shown += _check_table(tab, table, f"{category} / {sub}")
            tab.screenshot(f"{_slug(category)}--{_slug(sub)}")
            tab.click(tab.menu_item(category))  # back through the breadcrumb
    assert n_shown == n_json, f"{category}: {n_shown} entries listed, the JSON has {n_json}"


def test_each_category_lists_its_entries(tab, report):
    results, categories = report
    problems = []
    for category in sorted(categories):  # every category, even after one has failed
        try:
            _visit_category(tab, results, category, categories[category])
        except AssertionError as exc:
            problems.append(str(exc))
            tab.reload()
    shots = sorted(tab.shots.glob("*.png"))
    small = [p.name for p in shots if p.stat().st_size <= MIN_SCREENSHOT_BYTES]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    assert shots and not small, f"blank screenshots: {small}"
    tab.assert_no_js_errors()


def _a_figure(results: dict, categories: dict) -> tuple[str, str, str]:
    """A captioned figure of a switch-free table: (category, subcategory, path)."""
    for category in sorted(categories):
        for sub, paths in sorted(categories[category].items()):
            if expected_table(results, paths).toggle is not None:
                continue
            for path in paths:
                entry = results[path]
                if entry["mime_type"].startswith("image/") and entry.get("caption"):
                    return category, sub, path
    pytest.fail("the report has no captioned figure")


def _open_figure(tab: ReportPage, report: tuple[dict, dict], category: str, sub: str, path: str):
    """Click the eye of ``path``'s row: the figure in the main panel; its image and info link."""
    results, categories = report
    page = tab.page
    tab.home()
    tab.click(tab.menu_item(category))
    if len(categories[category]) > 1:
        tab.click(tab.menu_item(sub))
    table = expected_table(results, categories[category][sub])
    entry = results[path]
    if table.headers == ["File"]:
        cells = (path,)
    else:
        cells = tuple(str(entry["labels"].get(h, "")) for h in table.headers)
    row = page.locator("nav table tbody tr").filter(
        has=page.locator("td", has_text=re.compile(rf"^\s*{re.escape(cells[0])}\s*$"))
    )
    row = [
        r
        for r in row.all()
        if tuple(t.strip() for t in r.locator("td").all_text_contents()[:-1]) == cells
    ]
    assert len(row) == 1, f"no single row {cells} in {category} / {sub}"
    view, info = row[0].locator("td").last.locator("a").all()
    tab.click(view)  # the eye: the figure in the main panel
    image = page.locator("#app div.justify-center img[src^='data:']")  # the main panel
    image.wait_for()
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    return image, info


def test_a_figure_opens_with_its_caption(tab, report):
    results, categories = report
    category, sub, path = _a_figure(results, categories)
    page = tab.page
    entry = results[path]
    image, info = _open_figure(tab, report, category, sub, path)
    tab.click(info)  # the caption, labels and rule in the navigation panel
    page.get_by_text("Description", exact=True).wait_for()
    caption_text = html.unescape(re.sub(r"<[^>]+>", " ", entry["caption"]))
    first_words = " ".join(caption_text.split()[:4])
    caption = page.locator("nav li.prose")
    caption.wait_for()
    assert first_words in " ".join(caption.inner_text().split()), first_words
    assert image.is_visible()
    shot = tab.screenshot("zz-figure-" + _slug(Path(path).stem))
    assert shot.stat().st_size > MIN_SCREENSHOT_BYTES
    tab.assert_no_js_errors()


def _summary_figures(results: dict, categories: dict) -> list[tuple[str, str, str]]:
    """The ROI charts and the first score map of the summary: (category, subcategory, path)."""
    found, maps = [], []
    for category in sorted(categories):
        for sub, paths in sorted(categories[category].items()):
            for path in sorted(paths):
                stem = Path(path).stem
                if not results[path]["mime_type"].startswith("image/"):
                    continue
                if stem.startswith("roi_mean_r"):
                    found.append((category, sub, path))
                elif stem.startswith("sub-") and "_model-" in stem and stem.endswith("_r"):
                    maps.append((category, sub, path))
    assert found, "the report has no ROI chart"
    assert maps, "the report has no score map"
    return found + maps[:1]


def test_summary_figures_fit_the_window(tab, report):
    """The ROI charts and a score map at full size in a 1,600 px window, without scrolling."""
    results, categories = report
    page = tab.page
    for category, sub, path in _summary_figures(results, categories):
        image, _ = _open_figure(tab, report, category, sub, path)
        natural = image.evaluate("img => img.naturalWidth")
        shown = image.evaluate("img => img.getBoundingClientRect().width")
        assert natural <= VIEWPORT["width"], f"{path}: {natural} px wide"
        assert shown >= 0.5 * natural, f"{path}: drawn at {shown:.0f} of {natural} px"
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path}: the page scrolls sideways by {overflow} px"
        tab.screenshot("zz-fit-" + _slug(Path(path).stem))
    tab.assert_no_js_errors()
