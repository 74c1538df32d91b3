"""Every decision of a run, as pure functions: no I/O, no clock (`now` is a parameter), no API layer."""
