"""nsscaler: a CronJob batch reconciler that holds namespace families at zero replicas, and restores them."""

__version__ = "0.2.0"
