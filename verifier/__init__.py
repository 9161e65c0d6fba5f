"""The verifier role: audits drawn to it, replays tasks from committed inputs, and later the
dispute moves and referee duty. The daemon lands with the end-to-end issue; until then the
demo (scripts/demo.py) plays this role. Roles import truetrain.*, never each other.
"""
