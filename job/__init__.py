"""nsscaler: a CronJob batch reconciler that holds namespace families at zero replicas, and restores them."""

__version__ = "0.2.0"
#: where nsscaler's source lives: the one place it is written (pyproject's [project.urls] and the README say the
#: same; a unit test compares them)
REPOSITORY = "https://github.com/nsscaler/nsscaler"
