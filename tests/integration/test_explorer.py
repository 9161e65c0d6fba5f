"""The web explorer in a real headless Chromium (Debian's chromium + chromedriver, driven by
selenium) against `truetrain explorer` run as its own process over a devnet that holds a
real job, an audit that caught a cheating worker, its dispute game and the slash.

One market, one explorer process and one browser for the whole module; the job is left
half done so that a test can watch the page follow it. Every figure a page shows is
compared with a direct contract read; every page must load with an empty console.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import requests
from eth_abi import encode
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from web3 import Web3

from tests.integration.explorer_scenario import cheat_caught, open_market, play_game, submit
from truetrain.chain.client import dev_account
from truetrain.chain.devnet import free_port, port_is_free
from truetrain.cli_options import format_tokens
from truetrain.explorer.app import CSP
from truetrain.explorer.serve import start_explorer
from truetrain.market import JobStatus, TaskStatus, TaskView, encode_task_id
from truetrain.market.outcome import heldout_metric, round_losses
from truetrain.market.views import JobView
from truetrain.training import build_manifest, checkpoint_hash, load_checkpoint, publish_dataset

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
EVIL = "<script>alert(\"x\")</script>'\"&<img src=x onerror=alert(1)>"
EVIL_NAME = EVIL + " " + "A" * (199 - len(EVIL))  # the manifest schema's longest name: 200
EVIL_CID = EVIL.encode() + b"\xff\xfe" + b"B" * (126 - len(EVIL))  # invalid UTF-8, 128 bytes: the most allowed
EVIL_ACCOUNT = 10


def register_calldata(cid: bytes) -> bytes:
    """IdentityRegistry.register(submitter, ``cid``, ...) with the CID as raw bytes: web3 will
    not encode invalid UTF-8 as a string, but an ABI ``string`` is laid out exactly like ``bytes``."""
    selector = Web3.keccak(text="register(uint8,string,bytes32,(uint8,uint32,uint64,uint16,uint8))")[:4]
    return selector + encode(["uint8", "bytes", "bytes32", "(uint8,uint32,uint64,uint16,uint8)"],
                             [4, cid, b"\x11" * 32, (1, 1024, 1, 0, 1)])


@pytest.fixture(scope="module")
def market(tmp_path_factory, TrainToken):  # TrainToken: brownie has compiled build/
    home = tmp_path_factory.mktemp("explorer")
    net, driver = open_market(home)
    try:
        job_id = submit(net)
        task_id, game_id, cheater, auditor = cheat_caught(driver, job_id)
        play_game(driver, game_id)
        evil_job = submit(net, build=lambda store: build_manifest(
            name=EVIL_NAME, seed=3, numeric_mode="repro", model={"kind": "mlp", "widths": [64, 128, 10]},
            optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9}, batch_size=32, steps_per_task=8,
            checkpoint_interval=2, rounds=2, **publish_dataset(store, "digits", num_shards=1, seed=3)))
        w3, evil = net.contracts.w3, dev_account(EVIL_ACCOUNT)
        signed = evil.sign_transaction({
            "to": net.contracts.registry.address, "data": register_calldata(EVIL_CID), "gas": 500_000,
            "gasPrice": w3.eth.gas_price, "nonce": w3.eth.get_transaction_count(evil.address), "chainId": w3.eth.chain_id})
        assert w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(signed.raw_transaction))["status"] == 1
        port = free_port()
        server = start_explorer(net.rpc, net.nodes[0].api_addr, net.deployments, port, home / "explorer.log")
        try:
            yield {"net": net, "driver": driver, "job": job_id, "task": task_id, "game": game_id, "cheater": cheater,
                   "auditor": auditor, "evil_job": evil_job, "evil": evil.address, "url": f"http://127.0.0.1:{port}",
                   "port": port, "server": server}
        finally:
            server.terminate()
            server.wait(10)
    finally:
        driver.close()
        net.close()


@pytest.fixture(scope="module")
def browser(market):
    if not Path(CHROMIUM).exists() or not Path(CHROMEDRIVER).exists():
        raise AssertionError("chromium and chromedriver are missing: run `make setup` (apt-get install chromium "
                             "chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield chrome
    finally:
        chrome.quit()


def visit(browser, market, path: str):
    """Load ``path`` and check the console stayed clean (no error, no CSP violation)."""
    browser.get(market["url"] + path)
    assert browser.find_element(By.ID, "main")
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors
    return browser


def _settled(read):
    """``read()``, again if the live update swapped the page's main part in between (its
    elements then go stale: a read is retried, never half taken from two versions)."""
    for _ in range(20):
        try:
            return read()
        except StaleElementReferenceException:
            time.sleep(0.05)
    return read()


def text(browser, css: str) -> str:
    return _settled(lambda: browser.find_element(By.CSS_SELECTOR, css).text)


def cells(browser, row_css: str) -> list[str]:
    return _settled(lambda: [td.text for td in browser.find_element(By.CSS_SELECTOR, row_css)
                             .find_elements(By.TAG_NAME, "td")])


def table(browser, rows_css: str) -> list[list[str]]:
    return _settled(lambda: [[td.text for td in r.find_elements(By.TAG_NAME, "td")]
                             for r in browser.find_elements(By.CSS_SELECTOR, rows_css)])


def tokens(wei: int) -> str:
    return format_tokens(wei)


# ----------------------------------------------------------------------------- the pages


def test_jobs_page_shows_each_job_as_the_chain_holds_it(market, browser):
    visit(browser, market, "/jobs")
    market_contract = market["net"].contracts.market
    for job_id in (market["job"], market["evil_job"]):
        job = JobView.read(market_contract, job_id)
        row = cells(browser, f"#job-{job_id}")
        assert row[0] == str(job_id)
        assert row[2:] == [job.status.name.lower(), f"{job.current_round} / {job.rounds}", str(job.shards),
                           tokens(job.escrow), job.submitter[:8] + "…" + job.submitter[-4:]]
    assert text(browser, f"#job-{market['job']} td:nth-child(2)") == "digits-test"


def test_job_page_shows_tasks_marks_and_money_as_on_chain(market, browser):
    visit(browser, market, f"/jobs/{market['job']}")
    net, job_id = market["net"], market["job"]
    job = JobView.read(net.contracts.market, job_id)
    assert text(browser, "#job-state") == "active"
    assert text(browser, "#escrow-left") == f"{tokens(job.escrow)} TRAIN"
    disputed = TaskView.read(net.contracts.market, market["task"])
    row = cells(browser, f"#task-{market['task']}")
    assert row[:4] == ["1", "shard 0", disputed.status.name.lower(), disputed.worker[:8] + "…" + disputed.worker[-4:]]
    # (a Pending task's `deadline` is the block it was sent back in: no deadline is shown)
    shown = disputed.deadline and disputed.status not in (TaskStatus.PENDING, TaskStatus.FINALIZED)
    assert row[4] == (str(disputed.deadline) if shown else "-")
    audit = ("audit revealed" if disputed.audit_revealed else "audit committed" if disputed.audit_committed
             else "audit drawn" if disputed.audited else "-")
    assert row[5] == audit and row[6] == f"dispute {market['game']}"
    link = browser.find_element(By.CSS_SELECTOR, f"#task-{market['task']} a.dispute")
    assert link.get_attribute("href") == f"{market['url']}/disputes/{market['game']}"
    untouched = cells(browser, f"#task-{encode_task_id(job_id, 1, 0)}")
    assert untouched[2:4] == ["not yet", "-"]


def test_job_page_follows_the_job_live_then_shows_loss_accuracy_and_the_final_checkpoint(market, browser):
    net, driver, job_id = market["net"], market["driver"], market["job"]
    visit(browser, market, f"/jobs/{job_id}")
    browser.execute_script("window.stillThisPage = true;")
    played = driver.run_next(job_id)  # the disputed task, redrawn and done honestly
    assert played == market["task"]
    wait = WebDriverWait(browser, 30, poll_frequency=0.25)
    wait.until(lambda b: cells(b, f"#task-{played}")[2] == "finalized")
    assert browser.execute_script("return window.stillThisPage === true && Number(document.body.dataset.updates) >= 1")
    driver.run_job(job_id)
    wait.until(lambda b: text(b, "#job-state") == "completed")
    assert browser.execute_script("return window.stillThisPage")  # updated in place, never reloaded
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []

    job = JobView.read(net.contracts.market, job_id)
    assert text(browser, "#rounds-done") == "2 / 2" and text(browser, "#escrow-left") == "0.00 TRAIN"
    # every shard task as the chain has it (one CI run under load read a row still in its
    # challenge window right after the state read "completed": the rows are waited for too)
    shard_rows = {}
    for round_index in range(2):
        for index in range(2):
            task = TaskView.read(net.contracts.market, encode_task_id(job_id, round_index, index))
            assert task.status == TaskStatus.FINALIZED
            shard_rows[task.task_id] = ["finalized", task.worker[:8] + "…" + task.worker[-4:]]
    wait.until(lambda b: all(cells(b, f"#task-{t}")[2:4] == row for t, row in shard_rows.items()))
    with net.store() as store:
        reader = net.reader(store)
        manifest, test_set = reader.manifest(job_id), reader.test_set(job_id)
        losses = round_losses(reader, job)
        advanced = reader.rounds_advanced(job_id)
        accuracy = [heldout_metric(manifest, load_checkpoint(reader.fetch_checkpoint(*advanced[r]), advanced[r][1]), test_set)
                    for r in (1, 2)]
    assert table(browser, "#rounds tbody tr") == [
        [str(r), f"{losses[r - 1]:.4f}", f"{accuracy[r - 1] * 100:.1f}%", advanced[r][0]] for r in (1, 2)]
    assert len(browser.find_elements(By.CSS_SELECTOR, ".charts svg.chart polyline")) == 2
    # (waited for as the rows are: a run under load read the page's checkpoint one update
    # behind its state)
    wait.until(lambda b: text(b, "#checkpoint").startswith(job.checkpoint_cid))
    download = requests.get(market["url"] + f"/jobs/{job_id}/checkpoint", timeout=30)
    assert download.status_code == 200 and checkpoint_hash(download.content) == job.checkpoint_hash


def test_workers_pages_show_stake_reputation_earnings_and_the_slash(market, browser):
    net = market["net"]
    registry, stake = net.contracts.registry.functions, net.contracts.stake.functions
    visit(browser, market, "/workers")
    for index in (2, 3, 6, 7, 8, 9):
        address = dev_account(index).address
        row = cells(browser, f"#w-{address}")
        identity = registry.identityOf(address).call()
        assert row[2] == tokens(stake.stakeOf(address).call()[0])
        assert row[7] == str(identity[2])  # reputation
        assert row[8] == str(identity[-1][0])  # tasks done
        assert row[10] == tokens(identity[-1][5])  # amount slashed
    cheater = market["cheater"]
    visit(browser, market, f"/workers/{cheater}")
    history = registry.identityOf(cheater).call()[-1]
    assert history[4] == 1 and history[5] == 40 * 10**18
    assert f"disputes 0 won, 1 lost; {tokens(history[5])} TRAIN slashed" in text(browser, "#history")
    slash = net.contracts.stake.events.StakeSlashed().get_logs(from_block=0, argument_filters={"account": cheater})
    assert cells(browser, "#slashes tbody tr")[1:] == [
        "slashed", tokens(slash[0]["args"]["slashed"]), market["auditor"][:8] + "…" + market["auditor"][-4:],
        tokens(slash[0]["args"]["burned"])]
    winner = market["auditor"]
    visit(browser, market, f"/workers/{winner}")
    credited = sum(e["args"]["amount"] for e in net.contracts.stake.events.Credited().get_logs(
        from_block=0, argument_filters={"account": winner}))
    assert f"{tokens(credited)} from slashes and penalties" in text(browser, "#earned")


def test_dispute_page_shows_moves_clocks_votes_verdict_and_where_tokens_went(market, browser):
    net, game_id = market["net"], market["game"]
    visit(browser, market, "/disputes")
    assert cells(browser, f"#game-{game_id}")[4:] == [
        "resolved", market["cheater"][:8] + "…" + market["cheater"][-4:],
        market["auditor"][:8] + "…" + market["auditor"][-4:], "challenger won"]
    visit(browser, market, f"/disputes/{game_id}")
    game = net.contracts.game
    moves = game.events.DisputeBisected().get_logs(from_block=0, argument_filters={"gameId": game_id})
    rows = browser.find_elements(By.CSS_SELECTOR, "#timeline tr.DisputeBisected")
    assert len(rows) == len(moves) == 3
    full = game.functions.clockBlocks().call()  # each party's clock before its first move
    clocks = {"worker": full, "challenger": full}
    for row, move in zip(rows, moves):
        side = "worker" if move["args"]["mover"] == market["cheater"] else "challenger"
        clocks[side] = move["args"]["clockLeft"]
        tds = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        assert tds[0] == str(move["blockNumber"]) and tds[2].startswith(f"{side} claims positions ")
        assert tds[3:] == [str(clocks["worker"]), str(clocks["challenger"])]
    ended = game.events.BisectionEnded().get_logs(from_block=0, argument_filters={"gameId": game_id})[0]["args"]
    assert text(browser, "#disputed") == f"checkpoints {ended['lo']} → {ended['hi']}: steps " \
                                         f"{(ended['lo'] - 1) * 2}–{(ended['hi'] - 1) * 2}"
    votes = game.events.VoteRevealed().get_logs(from_block=0, argument_filters={"gameId": game_id})
    assert [v["args"]["vote"] for v in votes] == [2, 2, 2]
    assert text(browser, "#votes") == "worker 0, challenger 3, neither 0"
    assert text(browser, "#verdict") == "challenger won"
    slash = net.contracts.stake.events.StakeSlashed().get_logs(from_block=0)[0]["args"]
    shares = [(e["args"]["account"], e["args"]["amount"]) for e in net.contracts.stake.events.Credited().get_logs(
        from_block=0) if e["args"]["account"] != slash["winner"]]
    short = lambda a: a[:8] + "…" + a[-4:]  # noqa: E731
    table = [[td.text for td in r.find_elements(By.TAG_NAME, "td")]
             for r in browser.find_elements(By.CSS_SELECTOR, "#tokens tbody tr")]
    assert table == ([["slashed from the loser", short(slash["account"]), tokens(slash["slashed"])],
                      ["to the winner", short(slash["winner"]), tokens(slash["toWinner"])]]
                     + [["to a referee", short(a), tokens(v)] for a, v in shares]
                     + [["burned", "-", tokens(slash["burned"])]])
    assert slash["slashed"] == slash["toWinner"] + sum(v for _, v in shares) + slash["burned"]


def test_flows_page_shows_the_conservation_sum_checked_live(market, browser):
    net = market["net"]
    token = net.contracts.token.functions
    visit(browser, market, "/flows")
    minted, burned = token.totalMinted().call(), token.totalBurned().call()
    holders = [dev_account(i).address for i in range(20)] + [net.contracts.market.address, net.contracts.stake.address]
    held = sum(token.balanceOf(a).call() for a in holders)
    assert minted == held + burned and burned > 0
    assert text(browser, "#conservation") == (f"minted {tokens(minted)} = held {tokens(held)} + burned "
                                              f"{tokens(burned)}: conserved")
    assert text(browser, "#market") == tokens(token.balanceOf(net.contracts.market.address).call())
    assert text(browser, "#stake") == tokens(token.balanceOf(net.contracts.stake.address).call())
    assert text(browser, "#slashed") == tokens(40 * 10**18)
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart polyline")) == 3


# ----------------------------------------------------------------------------- security


def test_strings_from_chain_and_ipfs_render_escaped(market, browser):
    url = market["url"]
    for path, shown in ((f"/jobs/{market['evil_job']}", EVIL_NAME), (f"/workers/{market['evil']}", EVIL_CID)):
        visit(browser, market, path)
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
        assert browser.execute_script("return document.scripts.length") == 1  # explorer.js alone
        assert browser.execute_script("return document.querySelectorAll('img, [onerror]').length") == 0
        html = requests.get(url + path, timeout=10).text
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&#39;&#34;&amp;&lt;img src=x onerror=alert(1)&gt;" in html
    visit(browser, market, f"/jobs/{market['evil_job']}")
    name = browser.find_element(By.CSS_SELECTOR, "h1 .name .untrusted")
    assert name.text == EVIL_NAME[:80] + "…" and name.get_attribute("title") == EVIL_NAME
    visit(browser, market, f"/workers/{market['evil']}")
    profile = browser.find_element(By.CSS_SELECTOR, ".cid .untrusted")
    assert profile.get_attribute("title") == EVIL_CID.decode(errors="replace")
    assert "\ufffd\ufffd" in profile.text
    api = requests.get(url + f"/api/workers/{market['evil']}", timeout=10).json()["data"]
    assert api["profile_cid"] == EVIL_CID.decode(errors="replace") and api["hardware"] is None


@pytest.mark.parametrize("path, status, message", [
    ("/jobs/999", 404, "no job 999"),
    ("/jobs/abc", 400, "a job id must be a whole number from 1 to 18446744073709551616"),
    ("/jobs/0", 400, "a job id must be a whole number from 1 to 18446744073709551616"),
    ("/jobs/99999999999999999999999", 400, "a job id must be a whole number from 1 to 18446744073709551616"),
    ("/jobs?status=running", 400, "status must be one of active, completed, cancelled, expired"),
    ("/jobs?limit=-1", 400, "limit must be a whole number from 1 to 1000"),
    ("/workers/0x1234", 400, "not an Ethereum address"),
    ("/workers/0x" + "ab" * 20, 404, "no identity " + Web3.to_checksum_address("0x" + "ab" * 20)),
    ("/disputes/7", 404, "no dispute 7"),
    ("/disputes/%3Cscript%3E", 400, "a dispute id must be a whole number from 1 to 18446744073709551616"),
    ("/jobs/1/checkpoint/x", 404, "no such page"),
    ("/nowhere", 404, "no such page"),
])
def test_unknown_ids_and_malformed_queries_get_a_short_error_page_and_json(market, path, status, message):
    page = requests.get(market["url"] + path, timeout=10)
    assert page.status_code == status and page.headers["content-type"].startswith("text/html")
    assert f'<p class="error" id="error">{message}</p>' in page.text and "Traceback" not in page.text
    if path.startswith(("/jobs", "/workers", "/disputes")) and "checkpoint" not in path:
        api = requests.get(market["url"] + "/api" + path, timeout=10)
        assert api.status_code == status and api.json() == {"error": message, "status": status}


def test_every_response_carries_the_strict_csp_and_no_write_path_exists(market, browser):
    url = market["url"]
    for path in ("/jobs", "/api/jobs", "/static/explorer.js", "/nowhere", f"/jobs/{market['job']}/checkpoint"):
        headers = requests.get(url + path, timeout=30).headers
        assert headers["content-security-policy"] == CSP, path
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert CSP.startswith("default-src 'none'; script-src 'self';") and "unsafe" not in CSP
    visit(browser, market, "/flows")
    assert browser.execute_script("return document.querySelectorAll('script:not([src]), [style]').length") == 0
    for method in ("post", "put", "delete"):
        assert getattr(requests, method)(url + "/jobs", timeout=10).status_code == 405
    assert requests.get(url + "/jobs", headers={"Host": "rebound.example"}, timeout=10).status_code == 400


def listening(port: int) -> list[str]:
    """Local addresses of the sockets listening on TCP ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if int(hex_port, 16) == port and state == "0A":  # TCP_LISTEN
                raw = bytes.fromhex(address)
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # each 32-bit word little-endian
                found.append(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words))
    return found


def test_the_explorer_listens_on_loopback_only(market):
    assert listening(market["port"]) == ["127.0.0.1"]
    assert requests.get(market["url"] + "/api/flows", timeout=10).json()["data"]["conserved"] is True


def test_a_chain_that_stops_answering_gives_a_500_page_not_a_traceback(market):
    """Last: it stops the module's Anvil."""
    market["net"].anvil.stop()
    page = requests.get(market["url"] + "/jobs", timeout=60)
    message = "the explorer could not read this from the chain or IPFS; see its log"
    assert page.status_code == 500 and f'<p class="error" id="error">{message}</p>' in page.text
    assert "Traceback" not in page.text and page.headers["content-security-policy"] == CSP
    api = requests.get(market["url"] + "/api/flows", timeout=60)
    assert api.status_code == 500 and api.json() == {"error": message, "status": 500}
