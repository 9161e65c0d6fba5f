"""EventFollower against real Anvil chains: order, restarts, handler failures, reorgs, restarts of Anvil."""

from __future__ import annotations

import threading

import pytest

from tests.chain.conftest import mine, rpc
from truetrain.chain.flaky_rpc import FlakyRpcProxy
from truetrain.chain.client import ChainClient
from truetrain.chain.cursor import WHOLE_BLOCK
from truetrain.chain.events import EventFollower, Subscription
from truetrain.chain.settings import FollowerSettings
from truetrain.errors import ChainChanged, ConfigError, HandlerFailed

FAST = FollowerSettings(poll_interval_s=0.05, backoff_s=0.01, backoff_max_s=0.05)


def mint_all(client, token, owner, to, amounts) -> None:
    for amount in amounts:
        client.transact(token.functions.mint(to, amount), owner)


def follower_for(chain, token, db, settings=FAST, **kwargs):
    got: list = []
    follower = EventFollower(chain, [Subscription("token", token, ["Transfer"])], got.append, db, settings, **kwargs)
    return follower, got


def amounts(events) -> list[int]:
    return [e.args["value"] for e in events]


def test_follower_acrossFollowerRestarts_deliversEveryTransferOnceInOrder(client, token, accounts, tmp_path):
    db = tmp_path / "cursor.sqlite"
    mint_all(client, token, accounts[0], accounts[1].address, range(1, 13))
    first, got_first = follower_for(client, token, db)
    assert first.poll() == 12
    assert first.poll() == 0
    first.close()
    mint_all(client, token, accounts[0], accounts[1].address, range(13, 18))
    second, got_second = follower_for(client, token, db)  # a new object on the same SQLite file
    assert second.poll() == 5
    assert amounts(got_first + got_second) == list(range(1, 18))
    positions = [(e.block_number, e.log_index) for e in got_first + got_second]
    assert positions == sorted(positions) and len(set(positions)) == 17
    assert all(e.event == "Transfer" and e.key == "token" for e in got_first + got_second)


def test_follower_handlerRaises_cursorStaysBeforeEventAndItIsRedelivered(client, token, accounts, tmp_path):
    mint_all(client, token, accounts[0], accounts[1].address, range(1, 6))
    got, failed = [], []

    def handler(event):
        if event.args["value"] == 3 and not failed:
            failed.append(event)
            raise RuntimeError("disk full")
        got.append(event)

    follower = EventFollower(client, [Subscription("token", token, ["Transfer"])], handler, tmp_path / "c.db", FAST)
    with pytest.raises(HandlerFailed, match="RuntimeError: disk full") as caught:
        follower.poll()
    assert caught.value.retryable and caught.value.event.args["value"] == 3
    assert amounts(got) == [1, 2]
    assert (follower.position().block, follower.position().log_index) == (got[-1].block_number, got[-1].log_index)
    assert follower.poll() == 3
    assert amounts(got) == [1, 2, 3, 4, 5]


def test_follower_maxSpanFive_over20BlocksOfEvents_deliversAllInBoundedRanges(client, token, accounts, tmp_path):
    start = client.w3.eth.block_number
    mint_all(client, token, accounts[0], accounts[1].address, range(1, 21))  # one block each
    settings = FollowerSettings(poll_interval_s=0.05, max_span=5, start_block=start)
    follower, got = follower_for(client, token, tmp_path / "c.db", settings)
    calls = []
    original = follower.w3.eth.get_logs
    follower.w3.eth.get_logs = lambda params: calls.append(params) or original(params)
    try:
        assert follower.poll() == 20
    finally:
        del follower.w3.eth.get_logs
    assert amounts(got) == list(range(1, 21))
    assert all(c["toBlock"] - c["fromBlock"] + 1 <= 5 for c in calls)
    assert len(calls) >= 4


def test_follower_withConfirmations_holdsBackTheNewestBlocks(client, token, accounts, devnet, tmp_path):
    mint_all(client, token, accounts[0], accounts[1].address, [1, 2, 3])
    settings = FollowerSettings(poll_interval_s=0.05, confirmations=2)
    follower, got = follower_for(client, token, tmp_path / "c.db", settings)
    follower.poll()
    assert amounts(got) == [1]  # the mints of 2 and 3 sit in the two newest blocks
    mine(devnet.url, 2)
    follower.poll()
    assert amounts(got) == [1, 2, 3]


def test_follower_reorgBySnapshotRevert_detectsHashMismatchAndRedelivers(client, token, accounts, devnet, tmp_path):
    owner, to = accounts[0], accounts[1].address
    rewinds = []
    follower, got = follower_for(client, token, tmp_path / "c.db", on_rewind=lambda old, new: rewinds.append((old, new)))
    mint_all(client, token, owner, to, [1, 2, 3])
    follower.poll()
    checkpoint = follower.position()
    snapshot = rpc(devnet.url, "evm_snapshot")
    mint_all(client, token, owner, to, [4, 5, 6])
    follower.poll()
    assert amounts(got) == [1, 2, 3, 4, 5, 6]
    assert rpc(devnet.url, "evm_revert", snapshot) is True
    client.nonces.resync_all()  # the owner's last three transactions are gone with the fork
    mint_all(client, token, owner, to, [40, 50, 60, 70])  # a longer fork: same heights, other hashes
    assert follower.poll() == 4
    assert amounts(got) == [1, 2, 3, 4, 5, 6, 40, 50, 60, 70]
    assert follower.rewinds == 1
    (old, new), = rewinds
    assert (new.block, new.log_index, new.block_hash) == (checkpoint.block, WHOLE_BLOCK, checkpoint.block_hash)
    assert old.block == checkpoint.block + 3


@pytest.mark.parametrize("second_chain_mints", [3, 9], ids=["shorterChain", "longerChain"])
def test_follower_anvilRestartOnSamePort_rewindsAndReadsTheNewChain(own_devnet, accounts, tmp_path, second_chain_mints):
    node = own_devnet()
    chain = ChainClient(node.url, receipt_timeout_s=20)
    token, _ = chain.deploy("TrainToken", True, [], [], sender=accounts[0])
    mint_all(chain, token, accounts[0], accounts[1].address, range(1, 6))
    follower, got = follower_for(chain, token, tmp_path / "c.db")
    assert follower.poll() == 5
    node.stop()
    node = own_devnet(node.port)  # a fresh chain: same port, same chain id, new genesis
    chain = ChainClient(node.url, receipt_timeout_s=20)
    again, _ = chain.deploy("TrainToken", True, [], [], sender=accounts[0])
    assert again.address == token.address  # same deployer and nonce: same address, same tx hashes
    mint_all(chain, again, accounts[0], accounts[1].address, [100 + i for i in range(second_chain_mints)])
    delivered = follower.poll()
    assert follower.rewinds == 1
    assert delivered == second_chain_mints
    assert amounts(got) == list(range(1, 6)) + [100 + i for i in range(second_chain_mints)]


def test_follower_cursorBlockGone_checkChainRaising_keepsTheCursorForTheChainsReturn(own_devnet, accounts, tmp_path):
    node = own_devnet(state_path=tmp_path / "chain.json")
    chain = ChainClient(node.url, receipt_timeout_s=20)
    token, _ = chain.deploy("TrainToken", True, [], [], sender=accounts[0])
    mint_all(chain, token, accounts[0], accounts[1].address, [1, 2, 3])
    asked = []

    def check_chain():
        asked.append(ChainClient(node.url).w3.eth.get_block(0)["hash"])
        if len(asked) == 1:
            raise ChainChanged("another chain")

    follower, got = follower_for(chain, token, tmp_path / "c.db", check_chain=check_chain)
    assert follower.poll() == 3
    kept = follower.position()
    node.stop()
    node = own_devnet(node.port, chain_id=31338)
    with pytest.raises(ChainChanged, match="^another chain$"):
        follower.poll()
    assert follower.position() == kept and follower.rewinds == 0
    node.stop()
    node = own_devnet(node.port, state_path=tmp_path / "chain.json")  # the same chain again, from its file
    mint_all(chain, token, accounts[0], accounts[1].address, [4])
    assert follower.poll() == 1
    assert amounts(got) == [1, 2, 3, 4] and follower.rewinds == 0 and len(asked) == 1


def test_follower_throughProxyDroppingEveryFourthRequest_skipsNothing(client, token, accounts, devnet, tmp_path):
    mint_all(client, token, accounts[0], accounts[1].address, range(1, 16))
    with FlakyRpcProxy(devnet.url, every=4) as proxy:
        flaky = ChainClient(proxy.url, retries=4, backoff_s=0.01, backoff_max_s=0.05)
        follower, got = follower_for(flaky, token, tmp_path / "c.db", FollowerSettings(poll_interval_s=0.05, max_span=3))
        follower.poll()
        assert proxy.dropped > 0
    assert amounts(got) == list(range(1, 16))


def test_follower_run_retriesAFailingHandlerThenStops(client, token, accounts, tmp_path):
    mint_all(client, token, accounts[0], accounts[1].address, [1, 2])
    got, failures = [], []
    stop = threading.Event()

    def handler(event):
        if len(failures) < 2:
            failures.append(event)
            raise RuntimeError("flaky handler")
        got.append(event)
        if len(got) == 2:
            stop.set()

    follower = EventFollower(client, [Subscription("token", token, ["Transfer"])], handler, tmp_path / "c.db", FAST)
    thread = threading.Thread(target=follower.run, args=(stop,), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert amounts(got) == [1, 2] and len(failures) == 2


def test_follower_seenHelper_knowsDeliveredEvents(client, token, accounts, tmp_path):
    mint_all(client, token, accounts[0], accounts[1].address, [1])
    follower, got = follower_for(client, token, tmp_path / "c.db")
    follower.poll()
    assert follower.seen(got[0])


@pytest.mark.parametrize("field, value, message", [
    ("poll_interval_s", 0, "poll_interval_s must be > 0"),
    ("max_span", 0, "max_span must be >= 1"),
    ("confirmations", -1, "confirmations must be >= 0"),
    ("max_span", 2.5, "max_span must be an integer"),
])
def test_followerSettings_invalid_raisesConfigError(field, value, message):
    with pytest.raises(ConfigError, match=message):
        FollowerSettings(**{field: value})


def test_follower_unknownEvent_raisesConfigError(client, token, tmp_path):
    with pytest.raises(ConfigError, match="contract token has no event 'Minted'"):
        EventFollower(client, [Subscription("token", token, ["Minted"])], print, tmp_path / "c.db")
