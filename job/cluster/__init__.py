"""The API side of a run: the one client (`kube`), the reads that build a snapshot, the writes that carry
out decisions. Nothing here decides what to change."""
