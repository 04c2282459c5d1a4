"""A real browser on `ltx-jax serve`'s page (tests/test_serve.py runs it against the command).

Headless Chromium from Debian's `chromium` package, driven by Selenium through Debian's `chromium-driver`: the driver
is built from the same source package as the browser, so their versions always match, and Selenium is given both
paths, so it downloads nothing (Playwright's package instead pins the browser build it drives and fetches it, and
raw DevTools calls would reimplement what WebDriver's waits and clicks already do).

The test, as a person would: submits a long job from the form, watches its progress move in the queue, cancels it with
its button, submits a short one, waits for its video and plays it, and keeps a screenshot. Every console error of the
page (a script error, a failed request) fails it.
"""

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from serve_case import WAIT_S

CHROMIUM = ("chromium", "chromium-browser")  # Debian's name, Ubuntu's
DRIVER = "chromedriver"  # Debian's chromium-driver
# Each job's status text, in order, as the page shows it (the page rewrites it once a second).
RECORD_STATUSES = """
window.statuses = {};
new MutationObserver(() => {
  for (const job of document.querySelectorAll(".job")) {
    const seen = (window.statuses[job.id] ??= []), text = job.querySelector(".status").textContent;
    if (seen.at(-1) !== text) seen.push(text);
  }
}).observe(document.getElementById("jobs"), {subtree: true, childList: true, characterData: true});
"""
PLAY = """
const [video, done] = arguments;
video.play().then(() => done(null), (error) => done(String(error)));
"""


def installed() -> tuple[str, str]:
    """Chromium's and its driver's paths; skips where Chromium is not installed."""
    chromium = next((path for name in CHROMIUM if (path := shutil.which(name))), None)
    if chromium is None:
        pytest.skip("Chromium is not installed: apt-get install -y chromium chromium-driver (.ci/run installs them)")
    driver = shutil.which(DRIVER)
    assert driver is not None, "Chromium is installed without its WebDriver: apt-get install -y chromium-driver"
    return chromium, driver


@contextmanager
def chromium_browser() -> Iterator[object]:
    """A headless Chromium session whose console messages are kept (`get_log("browser")`)."""
    from selenium import webdriver  # noqa: PLC0415 - the test extra's; only where Chromium is installed
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    chromium, driver = installed()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # --no-sandbox: Chromium's sandbox cannot start as root, which CI's containers run as
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,1300"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(driver))
    browser.set_page_load_timeout(WAIT_S)
    browser.set_script_timeout(WAIT_S)
    try:
        yield browser
    finally:
        browser.quit()


def check_the_page_in_a_browser(url: str, screenshot: Path) -> None:
    from selenium.webdriver.common.by import By  # noqa: PLC0415
    from selenium.webdriver.support.ui import WebDriverWait  # noqa: PLC0415

    with chromium_browser() as browser:
        wait = WebDriverWait(browser, WAIT_S, poll_frequency=0.05)
        browser.get(f"{url}/")
        wait.until(lambda _: "ltx-jax-embedded" in browser.find_element(By.ID, "model").text)
        browser.execute_script(RECORD_STATUSES)

        def statuses(job: str) -> list[str]:
            return browser.execute_script("return window.statuses[arguments[0]] || []", job)

        # 1000 steps: seconds of denoising, whatever the machine; cancelled once its progress has been seen to move
        long_job = submit(browser, wait, "browser: a long fox", steps=1000)
        # live progress: two different percents shown while it runs, below 100 and one above 0
        wait.until(lambda _: len({s for s in statuses(long_job) if s.startswith("in_progress ")}) >= 2)
        percents = [int(s.split()[1].rstrip("%")) for s in statuses(long_job) if s.startswith("in_progress ")]
        assert all(0 <= p < 100 for p in percents), statuses(long_job)
        assert any(p > 0 for p in percents), statuses(long_job)
        browser.find_element(By.ID, long_job).find_element(By.CLASS_NAME, "cancel").click()
        wait.until(lambda _: statuses(long_job)[-1:] == ["cancelled"])

        short_job = submit(browser, wait, "browser: a red fox", steps=2)
        video = wait.until(lambda _: browser.find_elements(By.CSS_SELECTOR, f"#{short_job} video"))[0]
        assert statuses(short_job)[-1] == "completed"
        check_it_plays(browser, wait, video)
        browser.execute_script("arguments[0].scrollIntoView()", video)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(screenshot))
        print(f"screenshot of the page: {screenshot}")  # noqa: T201 - where the artifact is
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, f"the page's console has errors: {errors}"


def submit(browser: object, wait: object, prompt: str, *, steps: int) -> str:
    """Fills the form (a small video) and presses Generate; the new job's id, once the queue lists it."""
    from selenium.webdriver.common.by import By  # noqa: PLC0415

    for name, value in (("prompt", prompt), ("size", "64x64"), ("num_frames", "9"), ("num_inference_steps", steps)):
        field = browser.find_element(By.ID, name)
        field.clear()
        field.send_keys(str(value))
    browser.find_element(By.ID, "submit").click()
    find = "return [...document.querySelectorAll('.job')].find((job) => job.querySelector('.prompt').textContent " \
        "=== arguments[0])?.id"  # fmt: skip
    job = wait.until(lambda _: browser.execute_script(find, prompt))
    assert browser.find_element(By.ID, "error").text == ""
    return job


def check_it_plays(browser: object, wait: object, video: object) -> None:
    """The <video> loads the mp4 (64x64 frames), plays when asked and shows every one of its 9 frames."""
    wait.until(lambda _: browser.execute_script("return arguments[0].readyState >= 2 || arguments[0].error", video))
    assert browser.execute_script("return arguments[0].error", video) is None
    assert browser.execute_script("return [arguments[0].videoWidth, arguments[0].videoHeight]", video) == [64, 64]
    browser.execute_script("arguments[0].muted = true", video)  # headless Chromium plays muted media unprompted
    assert browser.execute_async_script(PLAY, video) is None
    shown = "return arguments[0].getVideoPlaybackQuality().totalVideoFrames"
    wait.until(lambda _: browser.execute_script(shown, video) >= 9)
    played = browser.execute_script("return [arguments[0].paused, arguments[0].currentTime]", video)
    assert played[0] is False
    wait.until(lambda _: browser.execute_script("return arguments[0].currentTime", video) != played[1])
