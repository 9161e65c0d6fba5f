"""The submitter's commands: ``truetrain job submit | status | list | results | cancel``,
``identity register | show`` and ``token balance | faucet | withdraw``. Roles import
truetrain.*, never each other.
"""
