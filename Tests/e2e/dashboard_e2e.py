#!/usr/bin/env python3
"""The dashboard end to end, in headless Chromium (selenium), against a running `upshift serve` that
holds the demo data (the app sample) beside the app demo with the README's first event. Run by scripts/e2e (and so by scripts/test), which starts the server.

    dashboard_e2e.py --base URL --read TOKEN --admin TOKEN [--screenshots DIR]

Exits non-zero at the first expectation that does not hold, saying which."""

import argparse
import http.cookiejar
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

os.environ.setdefault("SE_AVOID_STATS", "true")  # selenium must not try to reach the internet

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def expect(condition, message):
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {message}")


def browser(width=1280, height=2000):
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},{height}", "--lang=en-US"]:
        options.add_argument(argument)
    for path in ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]:
        if os.path.exists(path):
            options.binary_location = path
            break
    driver_path = next((p for p in ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"] if os.path.exists(p)), None)
    service = Service(executable_path=driver_path) if driver_path else Service()
    return webdriver.Chrome(options=options, service=service)


def replaced(element):
    """A wait condition: `element`'s page is gone. Chromium may say so, while the next page loads, with
    "Node with given id does not belong to the document" instead of a stale element reference."""
    def predicate(_driver):
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise
    return predicate


def submit(driver, button, then):
    """Clicks a form's button and waits for the next page (an element `then` = (By, value) on it)."""
    button.click()
    WebDriverWait(driver, 10).until(replaced(button))
    WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located(then))


def sign_in(driver, base, token):
    driver.get(base + "/dashboard")
    field = driver.find_element(By.NAME, "token")
    field.send_keys(token)
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action='/dashboard/sign-in'] button"), (By.TAG_NAME, "main"))


def sign_out(driver):
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form.signout button"), (By.TAG_NAME, "main"))


def post_form(base, path, fields, cookie=None, origin=None):
    """A POST as a forger would send it: urllib, no redirects followed. Returns the status."""
    request = urllib.request.Request(base + path, data=urllib.parse.urlencode(fields).encode(), method="POST")
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    if cookie:
        request.add_header("Cookie", cookie)
    if origin:
        request.add_header("Origin", origin)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def check(base, version):
    query = urllib.parse.urlencode({"platform": "ios", "version": version, "os": "17.4", "install": str(uuid.uuid4())})
    request = urllib.request.Request(f"{base}/v1/apps/sample/check?{query}", headers={"Cache-Control": "no-cache"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def requests_json(base, path, token):
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def session_cookie(driver):
    cookie = driver.get_cookie("upshift_session")
    return f"upshift_session={cookie['value']}" if cookie else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--read", required=True)
    parser.add_argument("--admin", required=True)
    parser.add_argument("--screenshots", help="save screenshots of the main pages to this folder")
    arguments = parser.parse_args()
    base = arguments.base.rstrip("/")
    shots = arguments.screenshots
    if shots:
        os.makedirs(shots, exist_ok=True)

    def screenshot(driver, name):
        if shots:
            # The whole page: as tall as its content.
            height = driver.execute_script("return document.documentElement.scrollHeight")
            width = driver.execute_script("return window.innerWidth")
            driver.set_window_size(width if width > 500 else 390, max(height + 120, 600))
            driver.save_screenshot(os.path.join(shots, f"{name}.png"))

    driver = browser()
    try:
        # 1. A read token sees the adoption chart of the demo data, and no controls.
        sign_in(driver, base, arguments.read)
        expect("Apps" in driver.title, "signed in with the read token, the app list shows")
        cookie = driver.get_cookie("upshift_session")
        expect(cookie is not None and cookie.get("httpOnly") and cookie.get("sameSite") == "Strict",
               "the session cookie is HttpOnly and SameSite=Strict")
        screenshot(driver, "apps")
        # The app demo (the README's first event) is listed too; the curves are the app sample's.
        expect(driver.find_elements(By.CSS_SELECTOR, "a[href='/dashboard/apps/demo']"),
               "the app demo, holding the README's first event, is listed beside sample")
        driver.find_element(By.CSS_SELECTOR, "a[href='/dashboard/apps/sample?platform=ios']").click()
        chart = driver.find_element(By.CSS_SELECTOR, "figure svg.chart")
        columns = chart.find_elements(By.CSS_SELECTOR, "rect")
        expect(len(columns) > 30, f"the adoption chart draws the demo's days ({len(columns)} segments)")
        legend = [item.text for item in driver.find_elements(By.CSS_SELECTOR, ".legend li")]
        expect(legend and legend[0] == "2.0.0", f"the newest version leads the legend ({legend[:3]})")
        expect(chart.find_element(By.TAG_NAME, "title").get_attribute("textContent").startswith("Share of daily active"),
               "the chart has a title for screen readers")
        driver.find_element(By.CSS_SELECTOR, "details summary").click()
        rows = driver.find_elements(By.CSS_SELECTOR, "details table tbody tr")
        expect(len(rows) == 30, f"the chart's numbers are in a table behind a disclosure ({len(rows)} days)")
        expect(not driver.find_elements(By.CSS_SELECTOR, "form[method='post'][action^='/dashboard/apps']"),
               "a read token sees no form that changes anything")
        expect(not driver.find_elements(By.LINK_TEXT, "Rollout"), "a read token sees no rollout link")
        screenshot(driver, "overview")
        driver.find_element(By.LINK_TEXT, "2.0.0").click()
        expect(driver.find_elements(By.CSS_SELECTOR, "figure svg.chart path.line"), "the release page draws the time-to-update curve")
        expect("Prompt funnel for 2.0.0" in driver.page_source, "the release page shows the prompt funnel")
        screenshot(driver, "release")

        # 2. Forged POSTs are refused: a read session with its own CSRF token, and a cross-site form.
        read_cookie = session_cookie(driver)
        csrf = driver.find_element(By.CSS_SELECTOR, "form.signout input[name='csrf']").get_attribute("value")
        fields = {"csrf": csrf, "platform": "ios", "revision": "0", "minimumVersion": "2.0", "reason": "forged"}
        expect(post_form(base, "/dashboard/apps/sample/minimum", fields, cookie=read_cookie) == 403,
               "a read session's POST to raise the minimum is refused (403)")
        driver.get(base + "/dashboard/apps/sample/rollout?platform=ios")
        expect("admin token" in driver.page_source, "the rollout page tells a read token it needs an admin token")
        driver.find_element(By.LINK_TEXT, "Back to the dashboard").click()
        sign_out(driver)
        expect(driver.find_elements(By.NAME, "token"), "sign-out leads back to the sign-in form")
        expect(post_form(base, "/dashboard/apps/sample/minimum", fields, cookie=read_cookie) == 401,
               "the signed-out session no longer works")

        # 3. An admin previews a minimum raise, applies it with a reason, and the check forces within seconds.
        sign_in(driver, base, arguments.admin)
        admin_cookie = session_cookie(driver)
        expect(post_form(base, "/dashboard/apps/sample/minimum", dict(fields, csrf="guessed"), cookie=admin_cookie) == 403,
               "an admin POST without the session's CSRF token is refused")
        driver.get(base + "/dashboard/apps/sample?platform=ios")
        driver.find_element(By.LINK_TEXT, "Rollout").click()
        before = check(base, "1.2")
        expect(before["action"] != "force", f"before: version 1.2 is not forced ({before['action']})")
        driver.find_element(By.NAME, "candidate").send_keys("2.0")
        submit(driver, driver.find_element(By.XPATH, "//button[text()='Preview impact']"), (By.ID, "impact-below"))
        below = int(driver.find_element(By.ID, "impact-below").text.replace(",", ""))
        expect(below > 0, f"the preview counts installs below 2.0 ({below})")
        expect(driver.find_elements(By.XPATH, "//th[text()='OS version']"), "the preview breaks the impact down by OS")
        screenshot(driver, "rollout-preview")
        form = driver.find_element(By.CSS_SELECTOR, "form[action='/dashboard/apps/sample/minimum']")
        form.find_element(By.NAME, "reason").send_keys("Sync bug in 1.x (e2e)")
        started = time.monotonic()
        submit(driver, form.find_element(By.CSS_SELECTOR, "button"), (By.ID, "adoption"))
        expect("Saved." in driver.page_source, "applying shows the overview with 'Saved.'")
        forced = None
        while time.monotonic() - started < 5:
            answer = check(base, "1.2")
            if answer["action"] == "force":
                forced = time.monotonic() - started
                break
            time.sleep(0.1)
        expect(forced is not None, f"the check answers force for 1.2 within seconds ({forced and round(forced, 2)} s)")

        # 4. The change is in the history, with who and why.
        driver.find_element(By.LINK_TEXT, "History").click()
        rows = driver.find_elements(By.CSS_SELECTOR, "tbody tr")
        expect(rows and "Sync bug in 1.x (e2e)" in rows[0].text and "minimumVersion" in rows[0].text,
               "the history's newest entry is the raise, with its reason")
        screenshot(driver, "history")

        # 5. A release not out yet is backtested before it can be added; nothing is written by the preview.
        driver.get(base + "/dashboard/apps/sample/rollout?platform=ios")
        expect(not driver.find_elements(By.XPATH, "//button[text()='Add the release']"),
               "'Add the release' is offered only once the release was previewed")
        form = driver.find_element(By.CSS_SELECTOR, "form[action='/dashboard/apps/sample/new-release']")
        form.find_element(By.NAME, "version").send_keys("9.0.0")
        released = form.find_element(By.NAME, "releasedAt")  # a month ago: past any notifyAfterDays
        released.clear()
        released.send_keys(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 30 * 86_400)))
        form.find_element(By.NAME, "reason").send_keys("what if 9.0.0 shipped (e2e)")
        submit(driver, form.find_element(By.XPATH, ".//button[text()='Preview the release']"), (By.ID, "backtest-changed"))
        changed = int(driver.find_element(By.ID, "backtest-changed").text.replace(",", ""))
        expect(changed > 0, f"the backtest of a new release counts the installs it would reach ({changed})")
        expect(driver.find_elements(By.XPATH, "//button[text()='Add the release']"), "after the preview, 'Add the release'")
        expect(check(base, "2.0.0").get("latestVersion") != "9.0.0", "the preview wrote nothing")

        # 6. The app's settings: saved at the revision the page showed, and the lookup follows.
        driver.find_element(By.LINK_TEXT, "Settings").click()
        ios = driver.find_element(By.XPATH, "//fieldset[legend='ios']")
        ios.find_element(By.CSS_SELECTOR, "input[name^='storeId.']").clear()
        ios.find_element(By.CSS_SELECTOR, "input[name^='storeId.']").send_keys("1234567890")
        ios.find_element(By.CSS_SELECTOR, "input[name^='bundleId.']").clear()
        ios.find_element(By.CSS_SELECTOR, "input[name^='bundleId.']").send_keys("com.example.sample")
        settings = driver.find_element(By.CSS_SELECTOR, "form[action='/dashboard/apps/sample/settings']")
        settings.find_element(By.NAME, "reason").send_keys("the lookup for Siren (e2e)")
        submit(driver, settings.find_element(By.XPATH, ".//button[text()='Save the app']"), (By.CSS_SELECTOR, "p.notice.ok"))
        expect("Saved." in driver.page_source, "saving the settings says 'Saved.'")
        request = urllib.request.Request(f"{base}/v1/apps/sample/lookup?bundleId=com.example.sample")
        with urllib.request.urlopen(request, timeout=10) as response:
            lookup = json.load(response)
        expect(lookup["resultCount"] == 1 and lookup["results"][0]["trackId"] == 1234567890,
               f"the lookup answers with the store id just saved ({lookup['resultCount']} results)")

        # 7. A rule: previewed (what it would do now, nothing recorded), then saved as a dry run.
        driver.find_element(By.LINK_TEXT, "Rules").click()
        form = driver.find_element(By.XPATH, "//form[fieldset/legend='A new rule']")
        form.find_element(By.NAME, "id").send_keys("raise-to-2")
        definition = form.find_element(By.NAME, "definition")
        definition.clear()
        definition.send_keys('{"kind": "raise_minimum", "version": "2.0", "share": 0.9, "windowDays": 7, "maximumForced": 100}')
        form.find_element(By.NAME, "reason").send_keys("raise once 2.0 is everywhere (e2e)")
        submit(driver, form.find_element(By.XPATH, ".//button[text()='Preview what it would do now']"), (By.ID, "preview"))
        preview = driver.find_element(By.ID, "preview").text
        expect("raise-to-2: the minimum is already at or above 2.0.0" in preview, f"the rule's preview says the minimum raised above is already there ({preview!r})")
        expect(requests_json(base, "/v1/apps/sample/rules", arguments.read)["rules"] == [], "the preview wrote nothing")
        form = driver.find_element(By.XPATH, "//form[fieldset/legend='A new rule']")
        submit(driver, form.find_element(By.XPATH, ".//button[text()='Save the rule']"), (By.CSS_SELECTOR, "p.notice.ok"))
        expect(driver.find_elements(By.XPATH, "//section[@class='rule']/h2[contains(., 'raise-to-2')]"),
               "the saved rule is listed, a dry run")

        # 8. A webhook: made (its secret shown this once), sent a test event that is listed, then removed.
        driver.find_element(By.LINK_TEXT, "Webhooks").click()
        form = driver.find_element(By.XPATH, "//form[fieldset/legend='A new webhook']")
        form.find_element(By.NAME, "url").send_keys("https://93.184.215.14/upshift")
        form.find_element(By.NAME, "kind.release.changed").click()
        form.find_element(By.NAME, "kind.adoption.crossed").click()
        form.find_element(By.NAME, "thresholds").send_keys("50, 90")
        submit(driver, form.find_element(By.XPATH, ".//button[text()='Create the webhook']"), (By.ID, "secret"))
        secret = driver.find_element(By.ID, "secret").text
        expect(secret.startswith("whsec_") and len(secret) == 70, "the new webhook's secret is shown")
        section = driver.find_element(By.CSS_SELECTOR, "section.webhook")
        expect("release.changed, adoption.crossed at 50 %, 90 %" in section.text, f"the webhook lists its kinds ({section.text!r})")
        submit(driver, section.find_element(By.XPATH, ".//button[text()='Send a test event']"), (By.CSS_SELECTOR, "p.notice.ok"))
        expect(secret not in driver.page_source, "the secret is not shown again")
        rows = driver.find_elements(By.XPATH, "//section[@class='webhook']//tbody/tr[td[2]='webhook.test']")
        expect(len(rows) == 1, "the test event is listed among the webhook's deliveries")
        section = driver.find_element(By.CSS_SELECTOR, "section.webhook")
        submit(driver, section.find_element(By.XPATH, ".//button[text()='Remove']"), (By.CSS_SELECTOR, "p.notice.ok"))
        expect("No webhook yet." in driver.page_source, "the removed webhook is gone")

        # 9. Phone width and dark mode still read (screenshots only).
        if shots:
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            driver.get(base + "/dashboard/apps/sample?platform=ios")
            screenshot(driver, "overview-dark")
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
            driver.set_window_size(390, 900)
            driver.get(base + "/dashboard/apps/sample/releases/2.0?platform=ios")
            expect(driver.find_element(By.ID, "health").text == "Health"
                   and "counts only installs whose SDK reports abnormal exits" in driver.page_source
                   and len(driver.find_elements(By.CSS_SELECTOR, "#health ~ details tbody tr")) > 0,
                   "the release page shows the release's health by day, noting whose installs it counts")
            screenshot(driver, "release-phone")
    finally:
        driver.quit()
    print("dashboard e2e: every expectation held")


if __name__ == "__main__":
    main()
