"""Render Mermaid diagrams with the mermaid library in Debian's headless Chromium (no browser
download): each diagram's SVG, or the parse or render error mermaid reports for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

# Where .ci/run puts the library (npm's mermaid package, MIT); MERMAID_JS overrides it.
DEFAULT_MERMAID = Path(__file__).resolve().parent.parent / ".ci" / "cache" / "mermaid" / "mermaid.min.js"


def mermaid_js() -> Path | None:
    path = Path(os.environ.get("MERMAID_JS") or DEFAULT_MERMAID)
    return path if path.is_file() else None


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


PAGE = """<!doctype html><html><head><meta charset="utf-8"><script src="{script}"></script>
<style>body {{ font-family: sans-serif; }} .diagram {{ border-bottom: 1px solid #ccc; margin: 8px 0; }}</style></head>
<body><pre id="out">pending</pre><div id="diagrams"></div>
<script type="application/json" id="sources">{sources}</script>
<script>
mermaid.initialize({{startOnLoad: false, securityLevel: "strict"}});
(async () => {{
  const sources = JSON.parse(document.getElementById("sources").textContent);
  const results = [];
  for (let i = 0; i < sources.length; i++) {{
    try {{
      await mermaid.parse(sources[i]);
      const {{svg}} = await mermaid.render("diagram" + i, sources[i]);
      const div = document.createElement("div");
      div.className = "diagram";
      div.innerHTML = svg;
      document.getElementById("diagrams").appendChild(div);
      results.push(svg.includes("<svg") && !svg.includes("Syntax error") ? "ok" : "error: no diagram drawn");
    }} catch (e) {{
      results.push("error: " + String(e && e.message || e).split("\\n").join(" "));
    }}
  }}
  document.getElementById("out").textContent = JSON.stringify(results);
}})();
</script></body></html>
"""


def render(sources: list[str], workdir: Path, screenshot: Path | None = None, height: int = 4000) -> list[str]:
    """'ok' or 'error: …' for each diagram; with `screenshot`, a PNG of the page as well."""
    script = mermaid_js()
    browser = chromium()
    assert script is not None and browser is not None
    page = workdir / "diagrams.html"
    payload = json.dumps(sources).replace("</", "<\\/")
    page.write_text(PAGE.format(script=script.as_uri(), sources=payload), encoding="utf-8")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
             "--virtual-time-budget=30000", f"--user-data-dir={workdir / 'profile'}"]
    done = subprocess.run(flags + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    marker = '<pre id="out">'
    start = done.stdout.find(marker)
    assert start >= 0, done.stderr[-2000:]
    text = done.stdout[start + len(marker):done.stdout.find("</pre>", start)]
    text = text.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert text != "pending", "mermaid did not finish within Chromium's time budget"
    if screenshot is not None:
        subprocess.run(flags + [f"--screenshot={screenshot}", f"--window-size=1400,{height}", page.as_uri()],
                       capture_output=True, timeout=180, check=True)
    return list(json.loads(text))
