"""The verifier role: ``truetrain verifier run`` audits the tasks drawn to it (replays them
from the committed inputs, commits and reveals its own root in time) and replays a sample
of other finished tasks within their challenge window. Roles import truetrain.*, never
each other.
"""
