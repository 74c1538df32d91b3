"""Development tools: what builds and runs the real components nsscaler is proven against, and what writes the
files derived from other files. Imported by the tests and the benchmark; never by nsscaler itself (`job/`).

- `cluster`: the local control plane and a real node, built from their Go modules (`make cluster-up`, `make node-up`)
- `builders`: the Kubernetes objects tests, the demo and the benchmark create, and a small admin client
- `demo`: the whole product in one command (`make demo`)
- `metrics_component`: the metrics component's derived files (`make metrics-manifests`)

`tools/` holds the two tools the image build itself uses (the locks, the bill of materials).
"""
