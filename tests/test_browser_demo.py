"""The demo app in a real browser: JupyterLab serves a copy of nbs/4_25_demo.ipynb on localhost, Debian's headless
Chromium (driven by Playwright) runs it, types a prompt, clicks Generate and waits for text on the page.
A screenshot goes to tests/artifacts/ (gitignored) for a person to look at."""
import json, os, re, shutil, signal, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "nbs" / "4_25_demo.ipynb"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def fast_copy(src: Path, dst: Path):
    "The notebook without its `#| slow` cells (as nbdev_test runs it) and without saved outputs."
    nb = nbformat.read(src, as_version=4)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and c.source.lstrip().startswith("#| slow"))]
    for c in nb.cells:
        if c.cell_type == "code": c.outputs, c.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, dst)

def quiet_lab_settings(settings_dir: Path):
    "JupyterLab user settings: no pop-ups (news, update checks), and every cell kept in the page (no windowing)."
    for ext, name, value in (("apputils-extension", "notification", {"fetchNews": "false", "checkForUpdates": False}),
                             ("notebook-extension", "tracker", {"windowingMode": "none"})):
        d = settings_dir / "@jupyterlab" / ext
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.jupyterlab-settings").write_text(json.dumps(value))

@pytest.fixture
def lab(tmp_path):
    "A JupyterLab server on a free localhost port, no token, serving a temp dir with the demo notebook."
    if not Path(CHROMIUM).exists(): pytest.skip(f"no Chromium at {CHROMIUM} (tools/setup.sh --dev installs Debian's)")
    pytest.importorskip("playwright.sync_api")
    work = tmp_path / "lab"; work.mkdir()
    fast_copy(NOTEBOOK, work / "4_25_demo.ipynb")
    quiet_lab_settings(tmp_path / "settings")
    port = free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                             "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
                             "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={work}",
                             "--LabApp.news_url=", "--allow-root"],
                            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None: pytest.fail(f"JupyterLab exited: {(tmp_path / 'lab.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=5) as r:
                    if r.status == 200: break
            except OSError: pass
            if time.time() > deadline: pytest.fail(f"JupyterLab did not start: {(tmp_path / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)                 # the server and the kernels it started, nothing else
        try: proc.wait(30)
        except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL); proc.wait(10)
        log.close()

def test_demo_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright, expect
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{lab}/lab/tree/4_25_demo.ipynb")
            page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for()
            page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=180_000)   # the kernel is up
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            # the chapter's main app: the output of the cell `app = App()` (other cells show apps on a tiny model)
            cell = page.locator(".jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text="app = App()"))
            app = cell.locator(".llmbook-app")
            app.wait_for(timeout=300_000)                    # every cell ran up to the app's display
            app.scroll_into_view_if_needed()
            prompt = app.locator(".llmbook-prompt textarea")
            prompt.fill("The three primary colors are")
            app.get_by_role("button", name="completion").click()
            readout = app.locator(".llmbook-max-tokens .widget-readout")   # the slider's number can be typed
            readout.click(); page.keyboard.press("Control+A"); page.keyboard.type("8"); page.keyboard.press("Enter")
            expect(readout).to_have_text("8")
            app.locator(".llmbook-generate-button").click()
            status = app.locator(".llmbook-status")
            expect(status).to_contain_text(re.compile("stopped:|Error"), timeout=600_000)  # first use loads the model, may compile kernels
            text = app.locator(".llmbook-text")
            expect(text).to_contain_text("The three primary colors are")
            generated = text.inner_text().split("The three primary colors are", 1)[1]
            assert generated.strip(), f"no generated text on the page; status: {status.inner_text()}"
            assert "Error" not in status.inner_text()
            expect(app.locator(".llmbook-candidates")).to_contain_text("was drawn with p =")
            app.locator(".llmbook-boundaries input").check()       # the tokens as buttons: click one
            chips = app.locator(".llmbook-chips button")
            expect(chips.first).to_be_visible()
            chips.nth(2).click()
            expect(app.locator(".llmbook-candidates")).to_contain_text("token #2:")
            app.locator(".llmbook-chips").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "demo_jupyterlab.png"), full_page=False)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "demo_jupyterlab_failure.png"))
            raise
        finally:
            browser.close()
