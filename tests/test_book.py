"""The strict book build (warnings are errors) from smoke-scale executed notebooks, and an offline
check of the rendered pages (local MathJax, charts as SVG; headless Chromium when installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from calibook.notebooks import notebook_names
from calibook.pages import copies
from lib.config import repo_root

pytestmark = pytest.mark.book

#: Every page the book stages: each notebook at its defaults, then its copies (PACS's other targets).
STAGED = [copy for name in notebook_names() for copy, _ in copies(name)]


@pytest.fixture(scope="module")
def html(smoke_book: Path) -> Path:
    return smoke_book


def test_every_toc_page_is_built(html: Path) -> None:
    pages = ["book/intro", "book/start_here", "book/ledger", "book/scales", "book/data", "book/api"]
    pages += ["book/bibliography"]
    pages += [f"book/{p}/overview" for p in ("moe", "l2d", "ccc", "rr")]
    pages += [f"notebooks/{n}" for n in STAGED]
    missing = [p for p in pages if not (html / f"{p}.html").exists()]
    assert not missing, f"pages missing from the build: {missing}"


def test_every_pacs_target_is_a_page_under_pacs(html: Path) -> None:
    """The build runs PACS once per held-out domain: the default (photo) is the PACS page, the other
    three are its sections, titled by their target, each running and publishing its own target."""
    from calibook.book import executed_path
    from calibook.page import read_published

    nav = (html / "notebooks" / "pacs.html").read_text()
    for target in ("art_painting", "cartoon", "sketch"):
        assert f"PACS, target {target}" in nav, f"the PACS page's navigation has no {target} section"
        assert read_published(executed_path(f"pacs-{target}", "smoke"))["target"] == target
    assert read_published(executed_path("pacs", "smoke"))["target"] == "photo"
    whole = (html / "notebooks" / "pacs-all.html").read_text()  # Table 2 with all four targets
    assert "PACS, every target: Table 2" in nav and "at <code class" in whole
    assert all(f">{t}<" in whole for t in ("photo", "art_painting", "cartoon", "sketch")) and "—" not in whole


def test_landing_page_lists_the_scale_of_every_page(html: Path) -> None:
    text = (html / "book" / "intro.html").read_text()
    for name in STAGED:
        assert name in text, f"the landing page does not list {name}"
    assert "smoke:" in text
    assert "not executed in this build" not in text
    assert "at paper scale (the ledger" in text  # the scales table's second column (its quote is typeset)
    assert "GPU runs published" in text  # what results/ holds, per training page


def test_the_ledger_lists_every_page_that_judges_claims(html: Path) -> None:
    """The ledger is built from what the pages published: every page whose executed copy publishes
    a claims table has rows there, linked to the page; none says it was not executed."""
    from calibook.book import executed_path
    from calibook.page import read_published

    text = (html / "book" / "ledger.html").read_text()
    assert "not executed in this build" not in text
    assert "held</strong> at this scale" in text and "<details>" in text  # counts first, details one click away
    for name in STAGED:
        claims = read_published(executed_path(name, "smoke")).get("claims")
        if isinstance(claims, list) and claims:
            assert f"{name}.html" in text, f"the ledger has no row of {name}"
            assert str(claims[0]["claim"]).split("<")[0][:30] in text.replace("&#39;", "'").replace("&amp;", "&")
    assert "ledger.html" in (html / "book" / "intro.html").read_text(), "the intro does not link the ledger"


def test_setup_cells_are_hidden_and_code_links_to_its_source(html: Path) -> None:
    """A reader sees neither papermill's injected parameters (but on a copy, PACS's other targets,
    where they say its target) nor cells tagged ``remove-cell`` (``page.start`` / ``page.finish``);
    every page links the ``lib`` code it uses to its source."""
    import json

    from calibook.book import executed_path

    for name in STAGED:
        page = (html / "notebooks" / f"{name}.html").read_text()
        if name in notebook_names():
            assert "# Parameters" not in page, f"{name} shows papermill's injected parameters"
        else:  # a copy shows what it ran with beside the parameters cell's defaults
            assert "# Parameters" in page and name.split("-", 1)[1] in page.split("# Parameters")[1][:600]
        nb = json.loads(executed_path(name, "smoke").read_text())
        for cell in nb["cells"]:
            if "remove-cell" in cell.get("metadata", {}).get("tags", []):
                first = "".join(cell["source"]).strip().splitlines()[0]
                assert first not in page, f"{name} shows a hidden cell: {first!r}"
    sources = html / "_modules" / "lib"
    assert (sources / "page.html").exists(), "no highlighted source pages (sphinx.ext.viewcode)"
    assert "_modules/lib/" in (html / "book" / "api.html").read_text(), "the API page links no source"


def test_every_link_back_from_a_source_page_lands(html: Path) -> None:
    """A source page's "[docs]" links reach the documented name on the API page, re-exported names
    included, and the index of source pages links only pages that exist (``book/_ext/docstrings.py``)."""
    index = html / "_modules" / "index.html"
    missing = [h for h in re.findall(r'href="([^"#:]+[.]html)"', index.read_text()) if not (index.parent / h).exists()]
    assert not missing, f"the source index links pages that do not exist: {missing[:3]}"
    ids: dict[Path, set[str]] = {}
    dead = []
    for page in (html / "_modules").rglob("*.html"):
        for target, anchor in re.findall(r'href="([^"#:]+[.]html)#([^"]+)"', page.read_text()):
            path = (page.parent / target).resolve()
            if path not in ids:
                ids[path] = set(re.findall(r'id="([^"]+)"', path.read_text())) if path.exists() else set()
            if anchor not in ids[path]:
                dead.append(f"{page.relative_to(html)} -> {target}#{anchor}")
    assert ids, "no source page links back to the API page"
    assert not dead, f"{len(dead)} dead links, e.g. {dead[:3]}"


def test_pages_load_nothing_from_the_internet(html: Path) -> None:
    for page in html.rglob("*.html"):
        text = page.read_text()
        for src in re.findall(r'<script[^>]+src="([^"]+)"', text):
            assert not src.startswith(("http:", "https:", "//")), f"{page.name} loads {src}"
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists()


def test_executed_pages_print_no_warnings_or_truncated_cells(html: Path) -> None:
    """What a reader sees: no page shows a warning, an error, a stderr block (library noise such
    as tqdm's IProgress warning), a progress bar ("decoding PACS ... it/s"), a local path or a
    message as a quoted Python string, and no table cell is cut short with '...'."""
    import json

    from calibook.book import executed_path

    local = str(repo_root().parent)  # e.g. "PACS from /home/me/.../shared/data/pacs"
    noisy = []
    for name in STAGED:
        nb = json.loads(executed_path(name, "smoke").read_text())
        for i, cell in enumerate(nb["cells"]):
            for out in cell.get("outputs", []):
                text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
                if out.get("output_type") == "error" or out.get("name") == "stderr" or "Warning" in text:
                    noisy.append(f"{name} cell {i}: {text[:120]!r}")
                if re.search(r"\d+it/s|s/it\]|\d+%\|", text) or local in text:
                    noisy.append(f"{name} cell {i} shows progress or a local path: {text[:120]!r}")
                plain = set(out.get("data", {})) == {"text/plain"}
                if plain and text.startswith(("'", '"')):  # a message shown as a quoted Python repr
                    noisy.append(f"{name} cell {i} shows a string repr (use lib.report.show): {text[:120]!r}")
    assert not noisy, "pages print warnings or errors:\n" + "\n".join(noisy)
    cut = [p.stem for p in (html / "notebooks").glob("*.html") if "...</td>" in p.read_text()]
    assert not cut, f"pages with truncated table cells: {cut}"


def test_charts_are_rendered_as_svg(html: Path) -> None:
    pages = [html / "notebooks" / f"{n}.html" for n in STAGED]
    with_svg = [p.stem for p in pages if "<svg" in p.read_text() or ".svg" in p.read_text()]
    assert with_svg, "no notebook page contains a rendered chart"


CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (scripts/test.sh installs it where it can)"
)


def _dom(page: Path, profile: Path, width: int = 1280) -> str:
    """``page`` as headless Chromium renders it offline in a ``width``-px window, its DOM after scripts ran."""
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={width},900",
        "--virtual-time-budget=15000",
        "--dump-dom",
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


@needs_chromium
def test_page_renders_math_and_charts_in_headless_chromium(html: Path, tmp_path: Path) -> None:
    dom = _dom(html / "notebooks" / "routing_theory.html", tmp_path)
    assert "<mjx-container" in dom, "MathJax did not typeset the page's math offline"
    assert "<svg" in dom, "no chart was rendered"


# Measures the ledger as laid out at the window's width and writes what it found into the DOM.
_LEDGER_PROBE = """<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const out = {width, tables: 0, rows: 0, cut: [], heights: [], marks: 0};
  for (const table of document.querySelectorAll("table.ledger")) {
    out.tables += 1;
    if (table.getBoundingClientRect().right > width + 1 || table.scrollWidth > table.clientWidth + 1) out.cut.push("table");
    for (const row of table.querySelectorAll("tbody tr")) {
      if (!row.querySelector("details")) continue;
      out.rows += 1;
      out.heights.push(row.getBoundingClientRect().height / parseFloat(getComputedStyle(row).lineHeight || 20));
      for (const cell of row.children) {
        const box = cell.getBoundingClientRect();
        if (box.right > width + 1 || cell.scrollWidth > cell.clientWidth + 1) out.cut.push(cell.textContent.slice(0, 60));
        if (cell.classList.contains("mark") && box.width > 0 && cell.textContent.trim()) out.marks += 1;
      }
    }
  }
  document.body.setAttribute("data-ledger-probe", JSON.stringify(out));
});
</script>"""


@needs_chromium
def test_the_ledger_reads_at_a_glance_in_headless_chromium(html: Path, tmp_path: Path) -> None:
    """At 1280 px the ledger's tables fit the page (nothing cut off at the right edge), every row
    shows its three marks, and a row is one claim's line (its details folded), not a paragraph."""
    import json
    import re
    import statistics

    ledger = html / "book" / "ledger.html"
    probe = ledger.with_name("_ledger_probe.html")  # beside the page, so its styles and scripts load alike
    probe.write_text(ledger.read_text().replace("</body>", _LEDGER_PROBE + "</body>"))
    try:
        dom = _dom(probe, tmp_path)
    finally:
        probe.unlink()
    found = re.search(r'data-ledger-probe="([^"]*)"', dom)
    assert found, "the probe did not run in the ledger page"
    got = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert got["tables"] >= 4 and got["rows"] > 20, got
    assert not got["cut"], f"cut off at {got['width']} px: {got['cut'][:5]}"
    assert got["marks"] == 3 * got["rows"], got
    lines = sorted(got["heights"])
    assert statistics.median(lines) <= 2.5 and lines[-1] <= 4.5, f"rows too tall (in lines): {lines[-10:]}"


# Puts every chart of the build inline in one page and writes into the DOM the text that lies outside its chart.
_CHART_PROBE = """<script>
window.addEventListener("load", () => {
  const out = [];
  document.querySelectorAll("div[data-chart] > svg").forEach(svg => {
    const box = svg.viewBox.baseVal, inverse = svg.getScreenCTM().inverse();
    svg.querySelectorAll("text").forEach(text => {
      const b = text.getBBox(), m = inverse.multiply(text.getScreenCTM()), xs = [], ys = [];
      for (const [x, y] of [[b.x, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height], [b.x + b.width, b.y]]) {
        xs.push(m.a * x + m.c * y + m.e); ys.push(m.b * x + m.d * y + m.f);
      }
      const over = Math.max(box.x - Math.min(...xs), Math.max(...xs) - box.x - box.width,
                            box.y - Math.min(...ys), Math.max(...ys) - box.y - box.height);
      if (over > 1) out.push([svg.parentElement.dataset.chart, text.textContent.slice(0, 50), Math.round(over)]);
    });
  });
  document.body.setAttribute("data-chart-probe", JSON.stringify({charts: document.querySelectorAll("div[data-chart]").length, out}));
});
</script>"""


def _has_font(family: str) -> bool:
    fc_match = shutil.which("fc-match")
    found = subprocess.run([fc_match, family], capture_output=True, text=True).stdout if fc_match else ""
    return family.split()[0] in found


@needs_chromium
def test_no_chart_text_runs_past_its_chart_in_headless_chromium(html: Path, tmp_path: Path) -> None:
    """Every label and title of every chart lies inside its SVG when a browser draws it: vl-convert
    sizes a chart by Liberation Sans's widths, so ``lib.plots.FONT`` names it first (with DejaVu Sans,
    13% wider, legend labels and titles ran up to 18 px past the edge). Needs the font installed."""
    import json
    from html import unescape

    if not _has_font("Liberation Sans"):
        pytest.skip("the Liberation Sans font is not installed (scripts/test.sh installs it with Chromium)")
    charts = sorted((html / "_images").glob("*.svg"))
    body = "".join(f'<div data-chart="{p.name}">{re.sub(r"<[?]xml[^>]*>", "", p.read_text())}</div>' for p in charts)
    page = tmp_path / "charts.html"
    page.write_text(f"<html><body>{body}{_CHART_PROBE}</body></html>")
    found = re.search(r'data-chart-probe="([^"]*)"', _dom(page, tmp_path / "profile"))
    assert found, "the probe did not run"
    got = json.loads(unescape(found.group(1)))
    assert got["charts"] == len(charts) > 10, got["charts"]
    assert not got["out"], f"chart text past the chart's edge (chart, text, px): {got['out'][:8]}"
