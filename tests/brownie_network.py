"""pytest plugin, loaded early (``-p tests.brownie_network``): tunes the Anvil brownie launches.

brownie 1.22 fails to merge ``networks.development.cmd_settings`` from brownie-config.yaml
(its compiled ``_recursive_update`` meets the default ``None``), so the settings are put
into brownie's in-memory network table here, before brownie's own plugin connects. Tests
get their own port (``TT_ANVIL_PORT``, default 18545) so they never attach to a devnet the
user left running on 8545.
"""

from __future__ import annotations

import os

from brownie._config import CONFIG

TEST_ANVIL_PORT = int(os.environ.get("TT_ANVIL_PORT", "18545"))

CONFIG.networks["development"]["cmd_settings"] = {
    "port": TEST_ANVIL_PORT,
    "accounts": 20,
    "gas_limit": 30_000_000,
    "base_fee": 0,
    "default_balance": 10_000,
}
