"""`tunehost report`'s page in a real browser: headless Chromium (Debian's package; scripts/test installs it as
root) renders the page of a hostile snapshot and the fixture store. The DOM holds every finding, the charts are
drawn (pixels on their canvases), nothing reached the console, no request left the file, no script of the
snapshot's ran; on a phone the page does not scroll sideways; print keeps every section. The screenshots and the
printed PDF stay in the test's directory (or $TUNEHOST_TEST_OUTPUT/report/ when set) and their paths are printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.report.browser import Browser, find_browser

pytest.importorskip("websocket", reason="websocket-client (the DevTools client) is not installed: "
                                        "pip install -e '.[test]'")

BROWSER = find_browser()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine: scripts/test installs "
                                                        "Debian's chromium when it runs as root with apt-get")

CANVAS_INK = """JSON.stringify([...document.querySelectorAll('.chart')].map(el => {
  const c = el.querySelector('canvas');
  if (!c) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
}))"""


@pytest.fixture
def page(cli, tmp_path, hostile_snapshot, fixture_store, tiny_gguf) -> Path:
    out = tmp_path / "report.html"
    result = cli("report", "--snapshot", str(hostile_snapshot), "--store", str(fixture_store), "--model",
                 str(tiny_gguf), "--output", str(out))
    assert result.exit_code == 0, result.output
    return out


def test_the_page_in_chromium(page, tmp_path, hostile_snapshot):
    from tests.report.test_report import _findings

    expected = _findings(hostile_snapshot)
    assert BROWSER is not None
    with Browser(BROWSER) as browser:
        browser.viewport(1200, 900)
        browser.load(page)
        browser.settle()
        dom = json.loads(browser.evaluate("""JSON.stringify({
            findings: [...document.querySelectorAll('article.finding')].map(a => [a.dataset.check,
                       a.dataset.severity, a.querySelector('.summary').textContent]),
            verdict: document.getElementById('verdict').textContent,
            charts: document.documentElement.getAttribute('data-charts'),
            drawn: [...document.querySelectorAll('.chart')].map(c => c.getAttribute('data-drawn')),
            scripts: document.scripts.length, images: document.images.length,
            plans: document.querySelectorAll('.plan .bar').length,
            model: [...document.querySelectorAll('.run h3')].map(h => h.textContent),
        })"""))
        assert sorted(tuple(f[:2]) for f in dom["findings"]) == sorted((f.check, f.severity.value)
                                                                         for f in expected.findings)
        assert {f[2] for f in dom["findings"]} == {f.summary for f in expected.findings}
        assert dom["verdict"] == expected.verdict
        assert dom["charts"] == "2" and dom["drawn"] == ["20", "20"]
        assert dom["scripts"] == 3 and dom["images"] == 0  # no element of the snapshot's or the store's
        assert dom["plans"] == 2  # the plan's VRAM and RAM bars
        assert any("evil</script><script>alert(1)</script>?[31m<img src=x" in h for h in dom["model"])  # as text
        ink = json.loads(browser.evaluate(CANVAS_INK))
        assert len(ink) == 2 and all(n > 2000 for n in ink), ink  # axes, the line, points and marks drawn
        assert browser.problems() == []  # no console error, no exception, no CSP refusal, no alert()
        assert browser.requests() == [page.absolute().as_uri()]  # the file itself, nothing else
        shots = [browser.screenshot(tmp_path / "report-desktop.png")]

        # a phone: the page reflows (no sideways scrolling), the charts redraw at its width
        browser.viewport(390, 844, scale=2, mobile=True)
        browser.settle(0.5)
        width = json.loads(browser.evaluate("JSON.stringify([document.documentElement.scrollWidth, "
                                            "document.querySelector('.chart canvas').getBoundingClientRect().width])"))
        assert width[0] <= 390 and width[1] <= 390, width
        shots.append(browser.screenshot(tmp_path / "report-phone.png", full_page=False))
        browser.evaluate("document.getElementById('history').scrollIntoView()")
        shots.append(browser.screenshot(tmp_path / "report-phone-chart.png", full_page=False))

        # print: every section, the evidence unfolded, no navigation; the PDF is written
        browser.viewport(1000, 1400)
        browser.call("Emulation.setEmulatedMedia", media="print")
        browser.settle()
        shown = json.loads(browser.evaluate("""JSON.stringify({
            nav: getComputedStyle(document.querySelector('nav')).display,
            sections: [...document.querySelectorAll('section')].map(s => s.offsetHeight > 0),
            evidence: [...document.querySelectorAll('details:not([open]) table.evidence')]
                      .every(t => t.offsetHeight > 0)})"""))
        assert shown == {"nav": "none", "sections": [True] * 5, "evidence": True}
        pdf = browser.pdf(tmp_path / "report-print.pdf")
        assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 20_000
        shots.append(browser.screenshot(tmp_path / "report-print.png"))
        assert browser.problems() == [] and browser.requests() == [page.absolute().as_uri()]
    for shot in shots:
        assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 5_000
    kept = _keep([*shots, pdf, page])
    print("screenshots:", *kept, sep="\n  ")


def _keep(files: list[Path]) -> list[Path]:
    """The files where they stay: $TUNEHOST_TEST_OUTPUT/report/ when set (CI uploads it; pytest keeps only its last
    three tmp directories), else the test's tmp_path."""
    import os
    import shutil

    where = os.environ.get("TUNEHOST_TEST_OUTPUT")
    if not where:
        return files
    target = Path(where) / "report"
    target.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(f, target / f.name)) for f in files]


def test_a_script_in_the_page_that_is_not_its_own_would_not_run(tmp_path, page):
    """The Content-Security-Policy is live: a script element added to the file (as if escaping had failed) is
    refused by the browser and says so on the console."""
    text = page.read_text()
    injected = tmp_path / "injected.html"
    injected.write_text(re.sub(r"<body>", "<body><script>document.title='pwned'</script>", text, count=1))
    assert BROWSER is not None
    with Browser(BROWSER) as browser:
        browser.load(injected)
        browser.settle()
        assert browser.evaluate("document.title") != "pwned"
        assert any("Content Security Policy" in p for p in browser.problems())
        assert browser.evaluate("document.documentElement.getAttribute('data-charts')") == "2"
