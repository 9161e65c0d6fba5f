"""Content-addressed storage: a verifying Kubo RPC client and the local IPFS dev node glue.

    from truetrain.storage import StorageClient, StorageSettings

    client = StorageClient(StorageSettings(api_addr="/ip4/127.0.0.1/tcp/5001"))
    obj = client.add_bytes(b"checkpoint bytes")        # StoredObject(cid, hash, size)
    data = client.fetch(obj.cid, obj.hash, max_size=1 << 30)   # verified keccak256
"""

from truetrain.storage.client import StorageClient, connect_store
from truetrain.storage.devnode import DevNode, devnode_status, node_executable, start_devnode, stop_devnode
from truetrain.storage.models import NodeInfo, PeerInfo, StoredObject
from truetrain.storage.settings import DEFAULT_API_ADDR, StorageSettings

__all__ = [
    "DEFAULT_API_ADDR",
    "DevNode",
    "NodeInfo",
    "PeerInfo",
    "StorageClient",
    "StorageSettings",
    "StoredObject",
    "devnode_status",
    "node_executable",
    "start_devnode",
    "stop_devnode",
    "connect_store",
]
