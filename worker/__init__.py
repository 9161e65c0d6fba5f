"""The worker role (stakers run it): follows the market's events, trains drawn tasks, commits
and reveals. The long-running daemon lands with the end-to-end issue; until then the demo
(scripts/demo.py) plays this role with the same truetrain.* calls. Roles import truetrain.*,
never each other.
"""
