"""What nsscaler's world is made of: settings, policies, kinds, workloads and the marks it leaves on them.

Values and their parsing only: nothing here talks to the API or decides what to do."""
