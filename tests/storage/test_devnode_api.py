"""The dev node answers the Kubo RPC subset with Kubo's request and response shapes.

These talk raw HTTP (requests), not through the client, so a shape change shows up here.
"""

from __future__ import annotations

import json
import os

import pytest
import requests


@pytest.fixture
def api(shared_node):
    def call(path: str, method: str = "POST", **kwargs):
        return requests.request(method, f"{shared_node.api_url}/{path}", timeout=10, **kwargs)

    return call


def add(api, data: bytes, name: str = "blob.bin", **params) -> dict:
    response = api("add", params=params, files={"file": (name, data)})
    assert response.status_code == 200, response.text
    return response.json()


def test_add_answers_name_hash_and_cumulative_size_as_a_string(api):
    assert add(api, b"hello world\n", name="hello.txt") == {
        "Name": "hello.txt",
        "Hash": "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o",
        "Size": "20",  # Kubo's DAG size: 12 bytes of data plus the dag-pb/UnixFS envelope
    }


def test_add_with_cid_version_1_uses_raw_leaves(api):
    result = add(api, b"raw leaf", **{"cid-version": "1"})
    assert result["Hash"].startswith("bafkrei") and result["Size"] == "8"


def test_add_of_several_files_answers_one_json_line_each(api):
    body = {"a": ("a.txt", b"first"), "b": ("b.txt", b"second")}
    response = api("add", files=body)
    lines = [line for line in response.text.splitlines() if line]
    assert [json.loads(line)["Name"] for line in lines] == ["a.txt", "b.txt"]


def test_add_refuses_options_it_cannot_honour(api):
    response = api("add", params={"only-hash": "true"}, files={"file": ("x", b"x")})
    assert response.status_code == 400
    assert response.json() == {"Message": 'option "only-hash" is not supported by the dev node', "Code": 1, "Type": "error"}


def test_cat_honours_offset_and_length(api):
    cid = add(api, b"0123456789")["Hash"]
    assert api("cat", params={"arg": cid}).content == b"0123456789"
    assert api("cat", params={"arg": cid, "offset": 3, "length": 4}).content == b"3456"


def test_pin_ls_lists_recursive_roots_and_their_indirect_blocks(api):
    cid = add(api, os.urandom(600_000))["Hash"]  # a root and three leaves
    recursive = api("pin/ls", params={"type": "recursive"}).json()
    assert recursive["Keys"][cid] == {"Type": "recursive"}
    everything = api("pin/ls").json()["Keys"]
    assert everything[cid] == {"Type": "recursive"}
    assert sum(1 for entry in everything.values() if entry == {"Type": "indirect"}) >= 3
    assert api("pin/ls", params={"arg": cid}).json() == {"Keys": {cid: {"Type": "recursive"}}}


def test_pin_add_answers_pins_and_pin_ls_refuses_unpinned(api):
    cid = add(api, b"pin me later", pin="false")["Hash"]
    refused = api("pin/ls", params={"arg": cid})
    assert refused.status_code == 500
    assert refused.json() == {"Message": f"path '{cid}' is not pinned", "Code": 0, "Type": "error"}
    assert api("pin/add", params={"arg": cid}).json() == {"Pins": [cid]}
    assert api("pin/ls", params={"arg": cid}).json() == {"Keys": {cid: {"Type": "recursive"}}}


def test_id_version_and_swarm_peers_have_kubo_fields(api, shared_node):
    ident = api("id").json()
    assert {"ID", "PublicKey", "Addresses", "AgentVersion"} <= set(ident)
    assert ident["ID"] == shared_node.peer_id
    assert ident["Addresses"][0].endswith(f"/p2p/{shared_node.peer_id}")
    assert api("version").json()["Version"] == "0.30.0-truetrain-devnode"
    assert api("swarm/peers").json() == {"Peers": []}


def test_errors_have_kubo_shape_and_status(api):
    missing = api("cat")
    assert missing.status_code == 400
    assert missing.json() == {"Message": 'argument "ipfs-path" is required', "Code": 1, "Type": "error"}
    bad = api("cat", params={"arg": "not-a-cid"})
    assert bad.status_code == 500 and bad.json()["Type"] == "error"
    assert bad.json()["Message"].startswith('invalid path "not-a-cid"')


def test_get_is_405_and_unknown_paths_are_404(api):
    assert api("version", method="GET").status_code == 405
    assert api("no/such/command").status_code == 404
