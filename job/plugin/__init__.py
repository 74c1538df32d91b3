"""`kubectl nsscaler`: the kubectl plugin for the people who work in a namespace (wake, sleep, status).

A client of the user's own kubeconfig and permissions, installed with the package as `kubectl-nsscaler`."""
