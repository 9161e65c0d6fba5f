"""The worker role (stakers run it): ``truetrain worker run`` follows the market's events,
accepts the tasks drawn to it, trains them from verified inputs, publishes the checkpoints,
commits, reveals and withdraws its earnings; ``stake``, ``unstake`` and ``status`` manage
its stake. Roles import truetrain.*, never each other.
"""
