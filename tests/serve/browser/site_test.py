#!/usr/bin/env python3
"""The web interface in headless Chromium, against a real `fib serve` on loopback.

Makes a small dataset with real, signed traces (`fib run` on CPU solutions of the bundled
example, re-authored as a baseline and two competitors), starts `fib serve` on a free loopback
port, logs in through /login?token=, and then:
  - the leaderboard's numbers equal `fib report summary --json` and `fib report fast-p
    --format json` run on the same dataset, and its fast_p chart has data and drawn pixels;
  - a kernel page shows the definition's axes, its solutions ranked, its chart and traces;
  - every page the site links to, followed from the start pages, loads without an error, and
    every other link (the API's OpenAPI file) answers 200;
  - an evaluation submitted with POST /evaluate is followed on the task page to its result;
  - at scale (a generated dataset of 3,000 solutions and 10,000 traces, signed with the test's
    own key): the leaderboard's JSON is under 200 kB gzipped, a page of traces is the page
    asked for, each page renders within 2 s and no page is wider than the window.
Exits 77 (CTest's skip) where chromium, chromedriver or python3-selenium is missing.
"""

import argparse
import base64
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    skip(f"python3-selenium is not installed for {sys.executable}")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None
)

# (source author, op type, definition, solution, author in the test dataset)
SOLUTIONS = [
    ("fib-examples", "rmsnorm", "rmsnorm_h2048", "rmsnorm_h2048_naive", "baseline"),
    ("fib-examples", "rmsnorm", "rmsnorm_h2048", "rmsnorm_h2048_fast", "alice"),
    ("red-team", "rmsnorm", "rmsnorm_h2048", "rmsnorm_h2048_wrong_result", "mallory"),
    ("fib-examples", "gemm", "gemm_n2048_k2048", "gemm_n2048_k2048_naive", "baseline"),
    ("fib-examples", "gemm", "gemm_n2048_k2048", "gemm_n2048_k2048_blocked", "alice"),
]
DEFINITIONS = [("rmsnorm", "rmsnorm_h2048"), ("gemm", "gemm_n2048_k2048")]


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def make_dataset(source, root):
    example = os.path.join(source, "examples", "dataset")
    for op, name in DEFINITIONS:
        for kind, ext in (("definitions", "json"), ("workloads", "jsonl")):
            os.makedirs(os.path.join(root, kind, op), exist_ok=True)
            shutil.copy(
                os.path.join(example, kind, op, f"{name}.{ext}"), os.path.join(root, kind, op)
            )
    for author, op, definition, name, new_author in SOLUTIONS:
        with open(os.path.join(example, "solutions", author, op, definition, f"{name}.json")) as f:
            solution = json.load(f)
        solution["author"] = new_author
        folder = os.path.join(root, "solutions", new_author, op, definition)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{name}.json"), "w") as f:
            json.dump(solution, f, indent=2)


def run(cmd, env, **kw):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise Failure(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base, server, deadline):
    while time.time() < deadline:
        if server.poll() is not None:
            raise Failure(f"fib serve exited {server.returncode}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.2)
    raise Failure("fib serve did not answer /health in time")


def http_status(url, token):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def check_api_errors(base, token):
    """The site's JSON routes answer an unknown name with 404 and a bad query with 400."""
    for path, status in (
        ("/api/kernels/no_such_kernel", 404),
        ("/api/models/no-such-model", 404),
        ("/api/traces", 400),
        ("/api/traces?definition=rmsnorm_h2048&index=0", 400),
        ("/api/traces?definition=rmsnorm_h2048&id=x", 400),
        ("/api/traces?definition=rmsnorm_h2048&id=" + "0" * 24, 404),
        ("/api/traces?definition=rmsnorm_h2048", 200),
    ):
        got = http_status(base + path, token)
        check(got == status, f"GET {path}: {got}, expected {status}")


def start_browser():
    options = Options()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def load(driver, url):
    """Loads a page and waits until its script says it is done; fails on an error page."""
    driver.get(url)
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.body && document.body.dataset.state")
    )
    state = driver.execute_script("return document.body.dataset.state")
    if state != "ready":
        raise Failure(f"{url}: {driver.find_element(By.ID, 'content').text}")
    errors = [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and "favicon" not in e["message"]
    ]
    check(not errors, f"{url}: browser errors: {errors}")


def log_in_through_the_form(driver, base, token):
    """A browser without the cookie gets a login page (not 401 JSON); its form sets the cookie
    and leads to the site."""
    driver.get(f"{base}/ui/index.html")
    form = driver.find_elements(By.ID, "login-form")
    check(form, f"no login form without a token: {driver.page_source[:300]!r}")
    form[0].find_element(By.NAME, "token").send_keys(token)
    form[0].submit()
    WebDriverWait(driver, 30).until(lambda d: d.get_cookie("fib_token"))
    check(driver.get_cookie("fib_token"), "the login form set no fib_token cookie")
    driver.get_log("browser")  # the login page's own 401, which the later pages' checks would read


def cells(driver, field_prefix):
    out = {}
    for node in driver.find_elements(By.CSS_SELECTOR, f'[data-field^="{field_prefix}"]'):
        out[node.get_attribute("data-field")] = (
            float(node.get_attribute("data-value")),
            node.text,
        )
    return out


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def check_leaderboard(driver, base, summary, fast_p):
    load(driver, base + "/ui/index.html")
    ranking = cells(driver, "avg_speedup:")
    check(summary["rankings"], "fib report summary ranks nobody: the dataset is wrong")
    check(len(ranking) == len(summary["rankings"]), f"ranking rows {ranking} vs {summary}")
    for a in summary["rankings"]:
        key = f"{a['author']}:{a['basis']}"
        for field, text in (
            ("avg_speedup", f"{a['avg_speedup']:.2f}×"),
            ("success_rate", f"{a['success_rate'] * 100:.2f}%"),
            ("win_rate", f"{a['win_rate'] * 100:.2f}%"),
            ("workloads", str(a["workloads"])),
        ):
            value, shown = cells(driver, f"{field}:{key}")[f"{field}:{key}"]
            check(close(value, a[field]), f"{field} of {key}: page {value}, fib report {a[field]}")
            check(shown == text, f"{field} of {key}: page shows {shown!r}, expected {text!r}")
    authors = [s for s in fast_p["series"] if s["kind"] == "author"]
    shown = cells(driver, "fast_p:")
    check(len(shown) == len(authors) * len(fast_p["p"]), f"fast_p cells {shown}")
    for s in authors:
        for point in s["fast_p"]:
            key = f"fast_p:{s['name']}:{s['basis']}:{point['p']:g}"
            check(key in shown, f"no cell {key} among {sorted(shown)}")
            check(close(shown[key][0], point["fast_p"]), f"{key}: {shown[key][0]} vs {point}")
    chart = driver.execute_script(
        "const c = window.fibCharts && window.fibCharts.leaderboard;"
        "return c ? c.data.datasets.map(d => ({label: d.label,"
        " ys: d.data.map(p => p.y)})) : null;"
    )
    check(chart and len(chart) == len(authors), f"leaderboard chart datasets: {chart}")
    for d, s in zip(chart, authors):
        check(same_levels(d["ys"], s["curve"]), f"chart curve of {d['label']} differs from fib report's")
    check(canvas_has_ink(driver, "fastp-chart"), "the fast_p chart's canvas is blank")
    for _, definition in DEFINITIONS:
        check_definition_curves(driver, fast_p, definition)
    check_correctness_per_author(driver, summary)
    print(f"leaderboard: {len(summary['rankings'])} ranked authors, {len(shown)} fast_p cells match")


def check_correctness_per_author(driver, summary):
    """The per-author correctness table equals `fib report summary`'s authors, status by status;
    the red-team author's failures are shown as failures."""
    shown = cells(driver, "status:")
    expected = {}
    for a in summary["authors"]:
        for status, n in a["traces"]["by_status"].items():
            if any(b["traces"]["by_status"][status] for b in summary["authors"]):
                expected[f"status:{a['author']}:{status}"] = n
    check(shown.keys() == expected.keys(), f"correctness cells {sorted(shown)} vs {sorted(expected)}")
    for key, n in expected.items():
        check(shown[key][0] == n, f"{key}: page {shown[key][0]}, fib report {n}")
    mallory = [a for a in summary["authors"] if a["author"] == "mallory"]
    check(mallory and mallory[0]["traces"]["passed"] == 0, f"mallory passed: {mallory}")


def check_kernels_list(driver, base, summary):
    """The kernels list: one tab per op type filters it, a heading click sorts it, and the
    serving tags are shown and filter it."""
    load(driver, base + "/ui/kernels.html")
    rows = lambda: [r.find_element(By.TAG_NAME, "td").text
                    for r in driver.find_elements(By.CSS_SELECTOR, "#kernels-table tbody tr")]
    everything = rows()
    check(len(everything) == len(summary["definitions"]), f"kernels rows {everything}")
    driver.find_element(By.CSS_SELECTOR, '#op-type-tabs button[data-op-type="gemm"]').click()
    gemm = [d["name"] for d in summary["definitions"] if d["op_type"] == "gemm"]
    check(rows() == sorted(gemm), f"gemm tab shows {rows()}, expected {gemm}")
    driver.find_element(By.CSS_SELECTOR, '#op-type-tabs button[data-op-type=""]').click()
    driver.find_element(By.CSS_SELECTOR, '#kernels-table th[data-column="Traces"]').click()
    by_traces = sorted(summary["definitions"], key=lambda d: -d["traces"]["total"])
    check(rows()[0] == by_traces[0]["name"], f"sorted by traces: {rows()}")
    driver.find_element(By.CSS_SELECTOR, '#kernels-table th[data-column="Definition"]').click()
    check(rows() == sorted(everything), f"sorted by name: {rows()}")
    tags = sorted({t for d in summary["definitions"] for t in d["tags"] if t.startswith("model:")})
    if tags:
        options = [o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR, "#kernel-tag option")]
        check(tags[0] in options, f"tag {tags[0]} not among {options}")
        driver.execute_script(
            "const s = document.getElementById('kernel-tag'); s.value = arguments[0];"
            "s.dispatchEvent(new Event('change'));", tags[0])
        tagged = sorted(d["name"] for d in summary["definitions"] if tags[0] in d["tags"])
        check(rows() == tagged, f"tag {tags[0]}: {rows()} vs {tagged}")
    print(f"kernels list: op-type tabs, sorting and {len(tags)} model tag(s) filter as fib reports")


def check_solution_filters(driver, base, definition):
    """The kernel page's author filter keeps that author's solutions in the table and the chart."""
    load(driver, f"{base}/ui/kernel.html?name={definition}")
    row_cells = lambda: [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
                         for r in driver.find_elements(By.CSS_SELECTOR, "#solutions-table tbody tr")]
    before = row_cells()
    alice = [r[1] for r in before if r[2] == "alice"]
    check(alice and len(alice) < len(before), f"solutions before filtering: {before}")
    driver.execute_script(
        "const s = document.getElementById('solution-filter-author'); s.value = 'alice';"
        "s.dispatchEvent(new Event('change'));")
    after = row_cells()
    check([r[1] for r in after] == alice, f"author filter: {after} vs alice's {alice}")
    labels = driver.execute_script(
        "const c = window.fibCharts && window.fibCharts.kernel;"
        "return c ? c.data.datasets.map(d => d.label) : [];")
    check(labels and set(labels) <= set(alice), f"chart after the author filter: {labels}")
    print(f"kernel {definition}: the author filter keeps alice's {len(alice)} of {len(before)}")


def check_definition_curves(driver, fast_p, definition):
    """Picks one definition in the chart's selector: its authors' curves are drawn."""
    expected = [s for s in fast_p["series"]
                if s["kind"] == "author_definition" and s["definition"] == definition]
    driver.execute_script(
        "const s = document.getElementById('fastp-definition'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('change'));",
        definition,
    )
    WebDriverWait(driver, 10).until(lambda d: d.execute_script(
        "const c = window.fibCharts.leaderboard; return c && c.canvas &&"
        " document.body.contains(c.canvas) && c.data.datasets.length === arguments[0];",
        len(expected)))
    curves = driver.execute_script(
        "return window.fibCharts.leaderboard.data.datasets.map(d => d.data.map(p => p.y));")
    check(len(curves) == len(expected) and all(same_levels(c, s["curve"]) for c, s in zip(curves, expected)),
          f"{definition}: chart curves differ")
    check(canvas_has_ink(driver, "fastp-chart"), f"{definition}: the chart is blank")


def same_levels(drawn, curve):
    """The site draws a curve as the points where it takes a new level (and its last point)."""
    levels = [v for k, v in enumerate(curve) if k == 0 or v != curve[k - 1] or k == len(curve) - 1]
    return len(drawn) == len(levels) and all(abs(a - b) < 5e-4 for a, b in zip(drawn, levels))


SCALE_SOLUTIONS = 3000
SCALE_TRACES = 10000
SCALE_AUTHORS = 30
SCALE_WORKLOADS = 40  # per definition
MAX_LEADERBOARD_GZIP = 200_000
MAX_FIRST_RENDER_S = 2.0


def sign(record, key):
    """Signs a trace as fib does (src/trace/signature.cpp): Ed25519 over a prefix and the
    record with sorted keys, its signature field left out."""
    extra = record["evaluation"]["environment"]["extra"]
    extra.pop("signature", None)
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    value = key.sign(("fib trace signature v1\n" + text).encode())
    extra["signature"] = dict(SIGNATURE, value=base64.b64encode(value).decode())


SIGNATURE = {}


def dyadic(value):
    """The record with each float a multiple of 1/1024 (statistics of the run left out): fib
    spells a double with Grisu2, which for some is not Python's shortest spelling, and the
    signature covers the spelling; short binary fractions are spelled alike."""
    if isinstance(value, float):
        return round(value * 1024) / 1024
    if isinstance(value, dict):
        return {k: dyadic(v) for k, v in value.items() if k != "extra" or "signature" in v}
    if isinstance(value, list):
        return [dyadic(v) for v in value]
    return value


def make_scale_dataset(small, root, home):
    """SCALE_SOLUTIONS solutions by SCALE_AUTHORS authors over the small dataset's definitions,
    SCALE_WORKLOADS more workloads each, and SCALE_TRACES traces made from the small dataset's
    passed traces (new solution, workload and latency) and signed with the test's key."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    pem = [os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs if f == "signing-key.pem"]
    check(pem, f"no signing-key.pem under {home}")
    with open(pem[0], "rb") as f:
        key = load_pem_private_key(f.read(), None)
    shutil.copytree(os.path.join(small, "definitions"), os.path.join(root, "definitions"))
    templates, workloads = {}, {}
    for op, name in DEFINITIONS:
        with open(os.path.join(small, "workloads", op, f"{name}.jsonl")) as f:
            first = json.loads(f.readline())
        lines = []
        for w in range(SCALE_WORKLOADS):
            record = json.loads(json.dumps(first))
            record["workload"]["uuid"] = f"{name}-scale-{w:04d}"
            lines.append(record)
        workloads[name] = lines
        os.makedirs(os.path.join(root, "workloads", op))
        with open(os.path.join(root, "workloads", op, f"{name}.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in lines)
        for d, _, fs in os.walk(os.path.join(small, "traces")):
            for fn in fs:
                with open(os.path.join(d, fn)) as f:
                    for line in f:
                        t = json.loads(line)
                        if t["definition"] == name and t["evaluation"]["status"] == "PASSED":
                            templates[name] = dyadic(t)
    check(len(templates) == len(DEFINITIONS), f"no passed trace to copy for each of {DEFINITIONS}")
    SIGNATURE.update({k: v for k, v in next(iter(templates.values()))["evaluation"]["environment"]
                      ["extra"]["signature"].items() if k != "value"})
    sources = {}
    for _, op, definition, solution, author in SOLUTIONS:
        with open(os.path.join(small, "solutions", author, op, definition, f"{solution}.json")) as f:
            sources.setdefault(definition, (op, json.load(f)))
    names = []
    for i in range(SCALE_SOLUTIONS):
        op, definition = DEFINITIONS[i % len(DEFINITIONS)]
        solution = dict(sources[definition][1], name=f"{definition}_scale_{i:04d}",
                        author=f"author-{i % SCALE_AUTHORS:02d}")
        folder = os.path.join(root, "solutions", solution["author"], op, definition)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{solution['name']}.json"), "w") as f:
            json.dump(solution, f)
        names.append((op, definition, solution["name"]))
    traces = {}
    for i in range(SCALE_TRACES):
        op, definition, solution = names[(i * 7919) % len(names)]
        t = json.loads(json.dumps(templates[definition]))
        t["solution"] = solution
        # A solution's traces (i, i + 3000, ...) land on different workloads: the dataset
        # keeps one trace per solution and workload.
        t["workload"] = workloads[definition][(i + i // len(names)) % SCALE_WORKLOADS]["workload"]
        perf = t["evaluation"]["performance"]
        reference = max(perf["reference_latency_ms"], 1 / 64)
        perf["reference_latency_ms"] = reference
        perf["latency_ms"] = max(1 / 1024, dyadic(reference * (1 + (i * 37) % 997) / 256))
        perf["speedup_factor"] = max(1 / 1024, dyadic(reference / perf["latency_ms"]))
        sign(t, key)
        traces.setdefault(op, []).append(json.dumps(t, ensure_ascii=False))
    for op, lines in traces.items():
        os.makedirs(os.path.join(root, "traces", op), exist_ok=True)
        with open(os.path.join(root, "traces", op, "scale.jsonl"), "w") as f:
            f.writelines(line + "\n" for line in lines)


def api_get(base, token, path, gzipped=False):
    headers = {"Authorization": f"Bearer {token}"}
    if gzipped:
        headers["Accept-Encoding"] = "gzip"
    with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=120) as r:
        body = r.read()
        encoding = r.headers.get("Content-Encoding")
    return body, encoding


def first_render_s(driver, url):
    """Seconds from asking for a page to its script saying it is done (load() checks the rest)."""
    started = time.time()
    load(driver, url)
    return time.time() - started


def check_at_scale(driver, base, token):
    body, encoding = api_get(base, token, "/api/leaderboard", gzipped=True)
    check(encoding == "gzip", f"/api/leaderboard was sent with Content-Encoding {encoding}")
    board = json.loads(gzip.decompress(body))
    check(len(body) < MAX_LEADERBOARD_GZIP, f"/api/leaderboard is {len(body)} bytes gzipped")
    totals = board["summary"]["totals"]
    check(totals["traces"]["total"] >= SCALE_TRACES, f"the scale traces are not all read: {totals}")
    check(all(len(s["steps"]["p"]) <= 200 for s in board["fast_p"]["series"]), "a curve has over 200 points")
    print(f"scale: /api/leaderboard {len(body) / 1000:.0f} kB gzipped "
          f"({len(gzip.decompress(body)) / 1000:.0f} kB), {len(board['fast_p']['series'])} series")
    name = DEFINITIONS[0][1]
    plain, _ = api_get(base, token, f"/api/traces?definition={name}&page=3&page_size=40")
    page = json.loads(plain)
    check(page["page"] == 3 and page["page_size"] == 40 and len(page["traces"]) == 40,
          f"page 3 of 40 traces: {page['page']}, {page['page_size']}, {len(page['traces'])} rows")
    whole, _ = api_get(base, token, f"/api/traces?definition={name}&page=1&page_size=1000")
    check(page["traces"] == json.loads(whole)["traces"][80:120], "page 3 is not traces 81 to 120")
    driver.get(f"{base}/login?token={token}")
    pages = ["index.html", "kernels.html", f"kernel.html?name={name}", "models.html",
             f"trace.html?definition={name}&id={page['traces'][0]['id']}"]
    for p in pages:
        took = first_render_s(driver, f"{base}/ui/{p}")
        if p.startswith("kernel.html"):
            timings = driver.execute_script(
                "return performance.getEntriesByType('resource').filter(e => e.name.includes('/api/'))"
                ".map(e => [e.name.split('/api/')[1].slice(0, 40), Math.round(e.duration)]);")
            print(f"scale: {p} API calls (ms): {timings}")
        wide = driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;")
        print(f"scale: {p} rendered in {took:.2f} s")
        check(took < MAX_FIRST_RENDER_S, f"{p} took {took:.2f} s to render at scale")
        check(wide <= 0, f"{p} is {wide} px wider than the window")
        if p.startswith("trace.html"):
            check_trace_download(driver, base, token, name, page["traces"][0]["id"])
        if p.startswith("kernel.html"):
            check_solutions_pages(driver, p)
            rows = driver.find_elements(By.CSS_SELECTOR, "#traces-table tbody tr")
            pager = driver.find_element(By.ID, "traces-pager").text
            check(len(rows) == 50, f"{p}: {len(rows)} trace rows on the first page")
            check("page 1 of" in pager, f"{p}: pager says {pager!r}")
            legend = driver.find_elements(By.CSS_SELECTOR, "#kernel-fastp-legend .legend-item")
            drawn = driver.execute_script(
                "const c = window.fibCharts.kernel; return c.data.datasets.filter((d, i) =>"
                " c.isDatasetVisible(i)).length;")
            check(len(legend) > 10 and drawn == 10, f"{p}: {len(legend)} in the legend, {drawn} drawn")


def check_trace_download(driver, base, token, definition, trace_id):
    """The trace page's Download gives the trace as one JSON line, named by definition and id."""
    link = driver.find_element(By.ID, "trace-download")
    check(link.get_attribute("download") == f"{definition}-{trace_id}.jsonl",
          f"the trace's download is named {link.get_attribute('download')!r}")
    text = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(document.getElementById('trace-download').href).then(r => r.text()).then(done);")
    body, _ = api_get(base, token, f"/api/traces?definition={definition}&id={trace_id}")
    check(text.endswith("\n") and "\n" not in text[:-1], "the download is not one JSON line")
    check(json.loads(text) == json.loads(body)["trace"], "the download is not the trace")
    seed = json.loads(text)["evaluation"]["environment"]["extra"].get("seed", 0)
    check(str(seed) in text, f"the download's seed {seed} is not written exactly")


def check_solutions_pages(driver, page):
    """The kernel page's solutions come 100 at a time; page 2 goes on with the ranks of page 1."""
    rows = driver.find_elements(By.CSS_SELECTOR, "#solutions-table tbody tr")
    pager = driver.find_element(By.ID, "solutions-pager")
    check(len(rows) == 100, f"{page}: {len(rows)} solution rows on the first page")
    check("page 1 of" in pager.text, f"{page}: solutions pager says {pager.text!r}")
    first = [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows]
    pager.find_element(By.PARTIAL_LINK_TEXT, "next").click()
    rows = driver.find_elements(By.CSS_SELECTOR, "#solutions-table tbody tr")
    second = [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows]
    check("page 2 of" in driver.find_element(By.ID, "solutions-pager").text,
          f"{page}: the solutions pager did not go to page 2")
    ranked = [int(x) for x in first + second if x.isdigit()]
    check(ranked == list(range(1, len(ranked) + 1)),
          f"{page}: ranks over two pages are not 1, 2, 3, ...: {ranked[:5]}...{ranked[-5:]}")


def serve_at_scale(args, tmp, env, small, token_file, token, driver):
    """Starts a second fib serve on the generated dataset and checks it (check_at_scale)."""
    root = os.path.join(tmp, "scale")
    started = time.time()
    make_scale_dataset(small, root, env["FIB_HOME"])
    print(f"scale: dataset generated in {time.time() - started:.1f} s")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with open(os.path.join(tmp, "serve-scale.log"), "w") as log:
        server = subprocess.Popen(
            [args.fib, "serve", "--local", root, "--host", "127.0.0.1", "--port", str(port),
             "--token-file", token_file, "--state", os.path.join(tmp, "state-scale"),
             "--baseline-author", "author-00"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            wait_healthy(base, server, time.time() + 120)
            check_at_scale(driver, base, token)
        except Failure as e:
            log.flush()
            with open(log.name) as f:
                raise Failure(f"{e}\n--- fib serve (at scale) log ---\n{f.read()[-3000:]}") from e
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()


def canvas_has_ink(driver, canvas_id):
    return driver.execute_script(
        "const c = document.getElementById(arguments[0]); if (!c) return false;"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let ink = 0; for (let i = 0; i < d.length; i += 4)"
        " if (d[i + 3] > 0 && (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200)) ink++;"
        "return ink > 500;",
        canvas_id,
    )


def check_kernel(driver, base, dataset, op, name):
    load(driver, f"{base}/ui/kernel.html?name={name}")
    with open(os.path.join(dataset, "definitions", op, f"{name}.json")) as f:
        definition = json.load(f)
    axes = driver.find_element(By.ID, "axes-table").text
    for axis, spec in definition["axes"].items():
        check(axis in axes, f"{name}: axis {axis} missing from {axes!r}")
        if "value" in spec:
            check(str(spec["value"]) in axes, f"{name}: value of {axis} missing")
    page = driver.find_element(By.TAG_NAME, "body").text
    check("fib checks solutions against its native reference" in page
          and "every solution is checked against" not in page,
          f"{name}: the Reference panel does not name the native reference fib checks against")
    solutions = driver.find_element(By.ID, "solutions-table").text
    expected = [s for s in SOLUTIONS if s[2] == name]
    for _, _, _, solution, _ in expected:
        check(solution in solutions, f"{name}: solution {solution} missing from the page")
    rows = driver.find_elements(By.CSS_SELECTOR, "#traces-table tbody tr")
    check(len(rows) == 2 * len(expected), f"{name}: {len(rows)} trace rows")
    check(canvas_has_ink(driver, "kernel-fastp-chart"), f"{name}: the fast_p chart is blank")
    print(f"kernel {name}: axes, {len(expected)} solutions and {len(rows)} traces shown")


def check_model_inventory(driver, base, token):
    """The model page's kernel inventory: a row per definition of `fib models SLUG --kernels`,
    each naming its engine kernels; the catalogue's other kernels with the setup that calls them."""
    api = json.loads(api_get(base, token, "/api/models/deepseek-v3")[0])
    load(driver, f"{base}/ui/model.html?id=deepseek-v3")
    rows = driver.find_elements(By.CSS_SELECTOR, "#model-inventory tbody tr")
    check(len(rows) == len(api["inventory"]["kernels"]) == api["definitions"],
          f"inventory rows: {len(rows)} shown, {len(api['inventory']['kernels'])} in the API")
    table = driver.find_element(By.ID, "model-inventory").text
    for kernel in ("cutlass_mla_decode", "fp8_blockwise_scaled_mm", "moe_fused_gate"):
        check(kernel in table, f"the inventory does not name {kernel}")
    idle = driver.find_element(By.ID, "model-not-called").text
    check("topk_softmax" in idle and "softmax top-k routing" in idle,
          "the not-called table does not say what runs topk_softmax")
    print(f"model deepseek-v3: {len(rows)} inventory rows")


def crawl(driver, base, token, starts):
    """Follows every link from the start pages; site pages must render, others answer 200."""
    seen, queue, pages, others = set(), list(starts), 0, 0
    while queue:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        path = urllib.parse.urlparse(url).path
        if not (path.startswith("/ui/") and path.endswith(".html")):
            check(http_status(url, token) == 200, f"link {url} does not resolve")
            others += 1
            continue
        load(driver, url)
        pages += 1
        hrefs = driver.execute_script(
            "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href);"
        )
        for href in hrefs:
            target = urllib.parse.urldefrag(href)[0]
            check(target.startswith(base), f"{url} links outside the server: {href}")
            if target not in seen:
                queue.append(target)
    print(f"crawl: {pages} pages rendered, {others} other links answered")
    return pages


def post_json(url, token, body):
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def check_task(driver, base, token, dataset):
    """Submits an evaluation and follows it on the task page until it is finished."""
    with open(os.path.join(dataset, "solutions", "alice", "rmsnorm", "rmsnorm_h2048",
                           "rmsnorm_h2048_fast.json")) as f:
        solution = json.load(f)
    with open(os.path.join(dataset, "workloads", "rmsnorm", "rmsnorm_h2048.jsonl")) as f:
        uuid = json.loads(f.readline())["workload"]["uuid"]
    task = post_json(base + "/evaluate", token, {"solution": solution, "workload_uuids": [uuid]})
    load(driver, f"{base}/ui/task.html?id={task['task_id']}")
    WebDriverWait(driver, 120).until(
        lambda d: d.find_element(By.ID, "task-status").text in ("completed", "failed")
    )
    status = driver.find_element(By.ID, "task-status").text
    check(status == "completed", f"task {task['task_id']}: {status}")
    rows = driver.find_elements(By.CSS_SELECTOR, "#task-traces tbody tr")
    check(len(rows) == 1 and "PASSED" in rows[0].text, f"task page rows: {[r.text for r in rows]}")
    print(f"task {task['task_id']}: followed to completed, 1 PASSED trace shown")
    check(driver.find_element(By.ID, "task-status").get_attribute("class") == "badge good",
          "a task whose workloads all passed has no green badge")
    check_failed_task(driver, base, token, solution, uuid)
    load(driver, f"{base}/ui/task.html")
    listed = driver.find_element(By.ID, "tasks-table").text
    check(task["task_id"][:8] in listed, f"the task list does not show {task['task_id']}: {listed!r}")
    row = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#tasks-table tbody tr")
           if task["task_id"][:8] in r.text]
    check(row and "1 PASSED" in row[0], f"the task list's outcome of {task['task_id']}: {row!r}")


def check_failed_task(driver, base, token, solution, uuid):
    """A solution that does not build: the task completes, but its badge is not green, the
    failure is named and the build log is shown."""
    broken = dict(solution, name=solution["name"] + "_broken")
    broken["sources"] = [dict(f, content="this is not a program (" + f["content"])
                         for f in solution["sources"]]
    task = post_json(base + "/evaluate", token, {"solution": broken, "workload_uuids": [uuid]})
    load(driver, f"{base}/ui/task.html?id={task['task_id']}")
    WebDriverWait(driver, 120).until(
        lambda d: d.find_element(By.ID, "task-status").text in ("completed", "failed")
    )
    badge = driver.find_element(By.ID, "task-status")
    check("good" not in badge.get_attribute("class"),
          f"task {task['task_id']} of a broken solution shows a green {badge.text!r}")
    failures = driver.find_element(By.ID, "task-failures").text
    check("ERROR" in failures, f"task {task['task_id']}: failures say {failures!r}")
    logs = driver.find_element(By.ID, "task-logs").text
    check(logs.strip() != "", f"task {task['task_id']}: no log shown")
    print(f"task {task['task_id']} (broken): {badge.text}, {failures}, a log shown")


def screenshot(driver, base, path, out):
    driver.set_window_size(1280, 900)
    load(driver, base + path)
    driver.save_screenshot(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fib", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--screenshot", help="also save the leaderboard as this PNG")
    args = ap.parse_args()
    if not CHROMIUM:
        skip("chromium is not installed (Debian package chromium)")
    if not CHROMEDRIVER:
        skip("chromedriver is not installed (Debian package chromium-driver)")

    started = time.time()
    tmp = tempfile.mkdtemp(prefix="fib-site-test-")
    env = dict(os.environ, FIB_HOME=os.path.join(tmp, "home"))
    dataset = os.path.join(tmp, "dataset")
    make_dataset(args.source, dataset)
    run([args.fib, "run", "--local", dataset, "--warmup-runs", "1", "--iterations", "5",
         "--num-trials", "1", "--threads", "1", "--build-cache", os.path.join(tmp, "cache")], env)
    summary = json.loads(run([args.fib, "report", "summary", "--local", dataset, "--json"], env))
    fast_p = json.loads(
        run([args.fib, "report", "fast-p", "--local", dataset, "--per-definition", "--format",
             "json"], env)
    )

    print(f"dataset with {len(SOLUTIONS)} solutions evaluated in {time.time() - started:.1f} s")
    token = "site-test-token-0123456789abcdef"
    token_file = os.path.join(tmp, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token + "\n")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "serve.log"), "w")
    server = subprocess.Popen(
        [args.fib, "serve", "--local", dataset, "--host", "127.0.0.1", "--port", str(port),
         "--token-file", token_file, "--state", os.path.join(tmp, "state"),
         "--baseline-author", "baseline", "--warmup-runs", "1", "--iterations", "5",
         "--num-trials", "1", "--threads", "1", "--build-cache", os.path.join(tmp, "cache")],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    driver = None
    try:
        wait_healthy(base, server, time.time() + 60)
        check_api_errors(base, token)
        driver = start_browser()
        log_in_through_the_form(driver, base, token)
        check_leaderboard(driver, base, summary, fast_p)
        for op, name in DEFINITIONS:
            check_kernel(driver, base, dataset, op, name)
        check_task(driver, base, token, dataset)
        check_model_inventory(driver, base, token)
        check_kernels_list(driver, base, summary)
        check_solution_filters(driver, base, "rmsnorm_h2048")
        starts = [f"{base}/ui/{p}" for p in
                  ("index.html", "kernels.html", "models.html", "trace.html", "task.html")]
        check(crawl(driver, base, token, starts) > len(starts), "the crawl found no links")
        serve_at_scale(args, tmp, env, dataset, token_file, token, driver)
        if args.screenshot:
            screenshot(driver, base, "/ui/index.html", args.screenshot)
    except Failure as e:
        log.flush()
        with open(os.path.join(tmp, "serve.log")) as f:
            tail = f.read()[-3000:]
        print(f"FAIL: {e}\n--- fib serve log ---\n{tail}")
        return 1
    finally:
        if driver:
            driver.quit()
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS in {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
