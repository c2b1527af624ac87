"""The report in a real browser: headless Chromium loads it, no script errors, every image decodes.

Chromium comes from Debian's ``chromium`` package. The test installs it when it is missing and
it can (root with apt-get); otherwise it skips and says why. It also saves a screenshot.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from frugalrl.ops.steps import report_step
from frugalrl.training import train

from .conftest import tiny_config

PROBE = """<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(String(e.message || (e.target && e.target.src))), true);
window.addEventListener("load", () => {
  const images = [...document.images];
  const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).length;
  document.body.setAttribute("data-images", images.length);
  document.body.setAttribute("data-broken", broken);
  document.body.setAttribute("data-errors", window.__errors.length);
});
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    apt = shutil.which("apt-get")
    if apt is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("no Chromium, and apt-get is missing or not root: cannot install Debian's chromium")
    for args in (["update"], ["install", "-y", "--no-install-recommends", "chromium"]):
        proc = subprocess.run([apt, "-qq", *args], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.skip(f"apt-get {args[0]} failed (exit {proc.returncode}): {proc.stderr.strip()[-200:]}")
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("apt-get installed chromium but it is not on PATH")
    return found


@pytest.mark.slow
def test_the_report_loads_in_chromium_with_every_image_decoded(tmp_path):
    browser = _chromium()
    run = tmp_path / "run"
    train(tiny_config(ppo={"total_timesteps": 2048}), run, interactive=False)
    decision = "# cartpole-policy version 1\n\n- decision: promoted to **champion**\n- reason: first model"
    report_step([{"runs": {"policy": str(run)}, "decisions": [decision]}], str(tmp_path / "report.html"))
    page = tmp_path / "probed.html"
    page.write_text((tmp_path / "report.html").read_text().replace("</head>", PROBE + "</head>"))
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-1000:]
    found = dict(re.findall(r'data-(images|broken|errors)="(\d+)"', dom.stdout))
    assert int(found["images"]) >= 2  # the learning curve and the recorded episode at least
    assert found["broken"] == "0" and found["errors"] == "0", found
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, "--window-size=1100,1600", f"--screenshot={shot}", (tmp_path / "report.html").as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
