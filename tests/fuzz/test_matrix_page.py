"""The matrix page in a real browser: headless Chromium from the distribution's packages.

The page is rendered from a synthetic matrix (three targets, sixty variants, every verdict, long
citations), a probe script is appended to a copy of it, and Chromium loads it from a file URL
(no network: the flags below turn off every background request).  The probe measures what a
reader sees at 1400 px and writes it into the DOM, which ``--dump-dom`` returns after the
scripts ran.  Chromium missing: a failure under CI (CI=true), a counted skip elsewhere (install:
``apt-get install -y chromium``).
"""

import html
import json
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest

from fuzz import matrix
from fuzz.matrix import PROPERTIES, Cell, Row

pytestmark = pytest.mark.slow

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1400,900", "--virtual-time-budget=5000"]

LONG = ("StateMismatch: https://example.invalid/docs/state.html (the team state is whatever the "
        "caller saves); a citation long enough to make a row very tall if it were shown inline "
        * 2)

# Collects what is visible once the page's own script ran; the test reads it from the DOM.
PROBE = """<script>
window.addEventListener('load', function () {
  var r = {}, heads = document.querySelectorAll('#matrix thead th');
  r.pageWidth = document.documentElement.scrollWidth;
  r.lastColumnRight = heads[heads.length - 1].getBoundingClientRect().right;
  r.rows = document.querySelectorAll('#matrix tbody tr').length;
  r.shownRows = [].filter.call(document.querySelectorAll('#matrix tbody tr'),
                               function (tr) { return tr.offsetParent !== null; })
                  .map(function (tr) { return tr.dataset.target; });
  r.shownText = document.getElementById('shown').textContent;
  r.summaryTargets = [].filter.call(document.querySelectorAll('#summary tbody tr'),
                                    function (tr) { return tr.offsetParent !== null; })
                       .map(function (tr) { return tr.dataset.target; });
  r.summaryAboveMatrix = document.getElementById('summary').getBoundingClientRect().top <
                         document.getElementById('matrix').getBoundingClientRect().top;
  r.legend = document.getElementById('legend').innerText;
  var cell = document.querySelector('#matrix td[data-verdict="D"]');
  r.cellHeight = cell.getBoundingClientRect().height;
  r.cellTitle = cell.title;
  var more = cell.querySelector('.more');
  r.detailHiddenBefore = !more.checkVisibility();
  cell.querySelector('details').open = true;
  r.detailShownAfter = more.checkVisibility() && more.innerText.indexOf('citation') >= 0;
  window.scrollTo(0, document.body.scrollHeight);
  r.tableTopAfterScroll = document.getElementById('matrix').getBoundingClientRect().top;
  r.headerTopAfterScroll = heads[0].getBoundingClientRect().top;
  document.body.setAttribute('data-probe', JSON.stringify(r));
});
</script>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    message = "chromium is not installed (apt-get install -y chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + ": the matrix page cannot be checked in a browser")
    pytest.skip(message)


def rows() -> list:
    verdicts = ["✗", "D", "✓", "?", "n/a", "declared"]
    out = []
    for i in range(60):
        target = ("alpha", "beta", "gamma")[i % 3]
        cells = {}
        for j, prop in enumerate(PROPERTIES):
            v = verdicts[(i + j) % len(verdicts)]
            if target == "gamma" and v == "✗":
                v = "?"  # gamma has no defect: the verdict filter must hide all of it
            cells[prop] = Cell(v, LONG if v == "D" else f"{v} detail for {prop}",
                               "report.md" if v in ("✗", "D") else "", 0.0,
                               short="StateMismatch" if v in ("✗", "D") else "12 tries",
                               rate="2/5" if v == "✗" and i % 2 else "")
        out.append(Row(target, f"variant-with-a-rather-long-name-{i:02d}", {"saver": "sqlite"},
                       cells, [], 0.0))
    return out


def load(tmp_path, fragment="") -> dict:
    exe = chromium()
    page = matrix.render(rows(), "html").replace("</html>", PROBE + "</html>")
    path = tmp_path / "matrix.html"
    path.write_text(page)
    url = path.as_uri() + ("#" + urllib.parse.urlencode(fragment) if fragment else "")
    proc = subprocess.run([exe, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                           url], capture_output=True, text=True, timeout=120)
    found = re.search(r'data-probe="([^"]*)"', proc.stdout)
    assert found, f"the probe did not run (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def test_page_fits_1400px_with_summary_legend_sticky_header_and_compact_cells(tmp_path):
    seen = load(tmp_path)
    assert seen["pageWidth"] <= 1400 and seen["lastColumnRight"] <= 1400, seen
    assert seen["summaryAboveMatrix"]
    assert seen["summaryTargets"] == ["alpha", "beta", "gamma"]
    for word in (*PROPERTIES, "✓", "✗", "D", "n/a", "?", "declared"):
        assert word in seen["legend"], word
    assert seen["rows"] == 60 and len(seen["shownRows"]) == 60
    # A long citation stays out of sight until asked for: on hover (title) and on click.
    assert seen["cellHeight"] < 40, seen["cellHeight"]
    assert "citation long enough" in seen["cellTitle"]
    assert seen["detailHiddenBefore"] and seen["detailShownAfter"]
    # Scrolled to the bottom, the table's top is far above, its header still on screen.
    assert seen["tableTopAfterScroll"] < -500
    assert abs(seen["headerTopAfterScroll"]) <= 1, seen["headerTopAfterScroll"]


def test_filters_by_target_and_verdict(tmp_path):
    seen = load(tmp_path, {"target": "beta", "verdict": "✗"})
    assert seen["shownRows"] and set(seen["shownRows"]) == {"beta"}
    assert seen["summaryTargets"] == ["beta"]
    assert seen["shownText"].startswith(f"{len(seen['shownRows'])} of 60")
    seen = load(tmp_path, {"verdict": "✗"})
    assert "gamma" not in seen["shownRows"] and {"alpha", "beta"} <= set(seen["shownRows"])
