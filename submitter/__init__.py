"""The submitter and challenger commands (create a job, status, results, cancel, challenge).
They land with the end-to-end issue; until then the demo (scripts/demo.py) plays this role.
Roles import truetrain.*, never each other.
"""
