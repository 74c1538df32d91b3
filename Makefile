# nsscaler — `make help` lists every target.
SHELL := /bin/bash
#: Debian's python3.11, at the Dockerfile's pinned package version (`make python`): the suite runs on the interpreter
#: the image ships
PYTHON ?= /usr/bin/python3.11
PYTHON_DEBIAN_VERSION := $(shell sed -n 's/^ARG PYTHON_DEBIAN_VERSION=//p' Dockerfile)
VENV := .venv
BIN := $(VENV)/bin
KUBECONFIG_LOCAL := $(CURDIR)/.cluster/kubeconfig
IMAGE ?= registry.example.com/platform/nsscaler
TAG ?= $(shell $(PYTHON) -c "import re;print(re.search(r'__version__ = \"(.+)\"', open('job/__init__.py').read())[1])")
OVERLAY ?= prod
NAMESPACE ?= nsscaler
JOB ?= nsscaler-manual-$(shell date +%s)
PYTEST_ARGS ?=
#: what a real node needs from Debian (`make node-deps`, as root), and the browser of the node tier's
#: wake-on-request test (Debian's headless chromium and its driver)
NODE_PACKAGES := containerd runc containernetworking-plugins iptables conntrack buildah mmdebstrap busybox-static \
	gcc libc6-dev chromium chromium-driver

.DEFAULT_GOAL := help

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# .venv holds requirements-dev.lock and nothing else (the runtime pins are the image's: what is tested is what ships),
# plus nsscaler itself; a changed lock rebuilds it from scratch, and so does a new version in job/__init__.py (the
# installed metadata carries it) or another interpreter. No resolver runs: every package is pinned and hashed.
$(BIN)/.installed: pyproject.toml requirements-dev.lock job/__init__.py $(VENV).python
	@$(PYTHON) -c 'import sys; sys.exit(sys.base_prefix != "/usr")' || { echo "$(PYTHON) is not Debian's python3.11: run \`make python\` (as root) first, or set PYTHON= to it" >&2; exit 2; }
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# The interpreter .venv is made from, rewritten only when it changes: another interpreter rebuilds .venv.
$(VENV).python: FORCE
	@v="$$($(PYTHON) -c 'import sys; print(sys.executable, sys.version)' 2>/dev/null)"; \
	[ -n "$$v" ] || { echo "no $(PYTHON): run \`make python\` (as root) to install Debian's python3.11 $(PYTHON_DEBIAN_VERSION)" >&2; exit 2; }; \
	[ "$$(cat $@ 2>/dev/null)" = "$$v" ] || echo "$$v" > $@

.PHONY: FORCE
FORCE:

python: ## (root) install Debian's python3.11 at the Dockerfile's pinned version, the interpreter .venv and the image share
	@pkgs="python3.11 python3.11-minimal libpython3.11-stdlib libpython3.11-minimal python3.11-venv"; \
	if [ "$$(dpkg-query -W -f='$${Version} ' $$pkgs 2>/dev/null)" = "$$(for p in $$pkgs; do printf '%s ' '$(PYTHON_DEBIAN_VERSION)'; done)" ]; then \
		echo "python3.11 $(PYTHON_DEBIAN_VERSION) present"; else \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
		$$(for p in $$pkgs; do printf '%s=%s ' $$p '$(PYTHON_DEBIAN_VERSION)'; done); fi

install: $(BIN)/.installed ## create .venv from requirements-dev.lock: nsscaler, its test and lint tools (kubectl, hadolint)

lock: install ## refresh the lock files from pyproject.toml's ranges, keeping pins they allow (UPGRADE=1: newest)
	$(BIN)/python -m tools.lock $(if $(UPGRADE),--upgrade)

control-plane: $(BIN)/.installed ## build etcd, kube-apiserver, kube-controller-manager, kubectl once (cached, ~8 min on 2 cores)
	$(BIN)/python -m devtools.cluster build

lint: install ## the locks match pyproject.toml; ruff, mypy, hadolint, every bench result rendered again from its JSON, the chart and its README from their sources, the version table from the tier's JSON, `kubectl kustomize` of every overlay, `make docs`
	@$(BIN)/python -m tools.lock --check
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile
	$(BIN)/python -m devtools.metrics_component --check
	$(BIN)/python -m devtools.rows --check
	$(BIN)/python -m devtools.chart --check
	$(BIN)/python -m devtools.chart_values --check
	$(BIN)/python -m devtools.admission --check
	$(BIN)/python -m devtools.versions_table --check
	$(BIN)/python -m bench.verify
	@$(MAKE) --no-print-directory docs
	@for o in kustomize/overlays/*/; do echo "kustomize $$o"; $(BIN)/kubectl kustomize $$o > /dev/null || exit 1; done

docs: install ## build the docs site (docs/_build/html) from scratch; any warning fails: a broken link, a missing page, an unknown anchor
	@rm -rf docs/_build
	$(BIN)/sphinx-build -W --keep-going -n -q -b html docs docs/_build/html

metrics-tools: install ## build kube-state-metrics, promtool, helm and krew once for the metrics, chart and plugin tests (cached, ~14 min on 2 cores)
	$(BIN)/python -m devtools.cluster.tools kube-state-metrics promtool helm krew

operator-tools: install ## build the CloudNativePG operator and Flux's kustomize-controller once from their Go modules, for the tests that run them (cached, ~15 min on 2 cores)
	$(BIN)/python -m devtools.cluster.tools cnpg kustomize-controller

publish-tools: install ## build crane and cosign once from their Go modules, for `make publish` and its tests (cached, ~8 min on 2 cores; helm: `make helm`)
	$(BIN)/python -m devtools.cluster.tools crane cosign helm

publish: install publish-tools ## publish a release: image and chart as OCI artifacts to REGISTRY=<host>[:<port>]/<path>, signed by digest (COSIGN_KEY, COSIGN_PASSWORD), SBOM attested; prints every digest
	@[ -n "$(REGISTRY)" ] || { echo "say where to publish: make publish REGISTRY=<host>[:<port>]/<path>" >&2; exit 2; }
	$(BIN)/python -m devtools.publish $(REGISTRY)

helm: install ## build helm v4 once from its Go module (cached, ~4 min on 2 cores)
	$(BIN)/python -m devtools.cluster.tools helm

admission: install ## regenerate kustomize/base/run-admission.yaml (what nsscaler's own account may write) from the kind registry
	$(BIN)/python -m devtools.admission

rows: install ## regenerate what follows the shipped kind rows: the operator-kinds RBAC component and the docs' catalogue table
	$(BIN)/python -m devtools.rows

chart: install ## regenerate charts/nsscaler from `kubectl kustomize` of kustomize/ (never edit the chart by hand)
	$(BIN)/python -m devtools.chart

chart-readme: install ## regenerate charts/nsscaler/README.md from the comments of its values.yaml (`make chart` does it too)
	$(BIN)/python -m devtools.chart_values

package: chart helm ## the chart archive, dist/nsscaler-<version>.tgz (the version of job/__init__.py)
	$$($(BIN)/python -m devtools.cluster.tools helm) package charts/nsscaler -d dist

krew: install ## build krew once from its Go module (cached), for the plugin's krew install test
	$(BIN)/python -m devtools.cluster.tools krew

plugin-archive: install ## the kubectl plugin as one file for krew: dist/krew/<archive>.tar.gz and its manifest nsscaler.yaml (KREW_URL=where the archive is served)
	$(BIN)/python -m devtools.krew --url "$(KREW_URL)"

keep-release: install helm control-plane ## keep the released version's chart package, wheel and records in tests/fixtures/releases/<version>/ (once; CHANGELOG.md dates it first)
	$(BIN)/python -m devtools.release

metrics-manifests: install ## regenerate the metrics component's PrometheusRule and Helm values from its sources
	$(BIN)/python -m devtools.metrics_component

gateway-crds: install ## fetch the Gateway API CRDs Traefik pins, once (a module download), for the HTTPRoute tests
	$(BIN)/python -m devtools.cluster.traefik --crds

gateway-tools: gateway-crds ## build Traefik v3.6.12 once, for the wake-on-request test on the node (~10 min on 2 cores)
	$(BIN)/python -m devtools.cluster.traefik

test: install control-plane metrics-tools operator-tools gateway-crds ## the whole suite (unit, integration, e2e) against a real local control plane
	$(BIN)/pytest -m "not slow and not node" $(PYTEST_ARGS)

test-versions: install helm gateway-crds ## the compatibility suite against Kubernetes 1.34 to 1.37, each built once (cached, ~6 min each; PYTEST_ARGS="--minor 1.35": one); records docs/operating/versions.json
	$(BIN)/python -m devtools.version_tier $(PYTEST_ARGS)

versions-table: install ## write the README's and docs/operating/versions.md's version table from docs/operating/versions.json (the version tier's own record)
	$(BIN)/python -m devtools.versions_table

test-slow: install control-plane ## the long fault tests (crash loops, API server restarts)
	$(BIN)/pytest -m "slow and not node" $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: no slow test selected

node-deps: ## (root) install the Debian packages a real node needs: containerd, runc, CNI plugins, buildah...
	@if dpkg-query -W -f='$${db:Status-Status}\n' $(NODE_PACKAGES) 2>/dev/null | grep -qvx installed \
		|| [ $$(dpkg-query -W $(NODE_PACKAGES) 2>/dev/null | wc -l) -ne $(words $(NODE_PACKAGES)) ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		$(NODE_PACKAGES); else echo "node packages present"; fi

node-binaries: install control-plane ## build kubelet, kube-scheduler, kube-proxy once (cached beside the control plane)
	$(BIN)/python -m devtools.cluster build --node

node-images: install node-deps ## (root) build the node's images offline: nsscaler, busybox, pause (cached)
	$(BIN)/python -m devtools.cluster.images

test-node: install node-binaries node-images gateway-tools publish-tools ## (root) the node tier: the CronJob's own image on a real node
	$(BIN)/pytest -m node tests/node $(PYTEST_ARGS)
	$(BIN)/pytest -m node tests/node/test_helm_on_node.py $(PYTEST_ARGS) || [ $$? -eq 5 ]  # its own node session

node-up: install node-binaries node-images ## (root) a control plane plus a Ready node (.cluster/kubeconfig)
	@$(BIN)/python -m devtools.cluster up --node

node-down: cluster-down ## (root) stop the node and the control plane, undo every host change

fuzz-random: install control-plane ## the fuzz tier with a new seed, printed first (CI runs the fixed one; FUZZ_EXAMPLES=<n>)
	@seed=$$($(BIN)/python -c "import random; print(random.SystemRandom().randrange(2**32))"); \
	echo "FUZZ_SEED=$$seed"; FUZZ_SEED=$$seed $(BIN)/pytest tests/integration/test_fuzz.py $(PYTEST_ARGS); \
	code=$$?; echo "FUZZ_SEED=$$seed (replay: FUZZ_SEED=$$seed $(BIN)/pytest tests/integration/test_fuzz.py)"; \
	exit $$code

test-unit: install ## only the fast pure tests
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

#: the mutants `make mutation` checks: the planner's rules and the parsing of the records a freeze leaves
#: (MUTANTS='job.decide.*' for a whole package: 4,668 mutants, job.model 2,366; hours on 2 shared cores)
MUTANTS ?= job.decide.plan.* job.model.workloads.* job.model.kinds.replicas.* job.model.kinds.suspend.* \
	job.model.kinds.node_selector.*
MUTATION_CHILDREN ?= 2

mutation: install ## the mutation score of the planner and the record parsing (mutmut; slow, not in `make test`; MUTANTS=, SURVIVORS=1)
	rm -rf mutants && mkdir mutants
	HYPOTHESIS_PROFILE=mutation nice -n 10 $(BIN)/mutmut run --max-children $(MUTATION_CHILDREN) \
		$(foreach m,$(MUTANTS),'$(m)') > mutants/run.log 2>&1 || { tail -c 3000 mutants/run.log; exit 1; }
	@tail -c 300 mutants/run.log | tr '\r' '\n' | tail -n 3
	@$(BIN)/python -m tools.mutation $(if $(SURVIVORS),--survivors)

cluster-up: install control-plane ## start a local control plane in the background (.cluster/kubeconfig)
	@$(BIN)/python -m devtools.cluster up

cluster-down: install ## stop the local control plane and remove its state
	@$(BIN)/python -m devtools.cluster down

demo: install control-plane ## the whole product in one command on a throwaway local control plane
	$(BIN)/python -m devtools.demo

bench: install control-plane ## the benchmark, side by side: nsscaler, kube-downscaler (PEER=<checkout>), naive, limit (~25 min)
	$(BIN)/python -m bench $(if $(PEER),--peer $(PEER))

bench-wake: install node-binaries node-images gateway-tools ## (root) wake on request against the schedule: request to ready on a real node, 5 each (~10 min)
	$(BIN)/python -m bench.wake

run: install ## run the job once against KUBECONFIG (default: the local control plane)
	KUBECONFIG=$${KUBECONFIG:-$(KUBECONFIG_LOCAL)} $(BIN)/nsscaler

dry-run: install ## plan only, print the table of what would change
	KUBECONFIG=$${KUBECONFIG:-$(KUBECONFIG_LOCAL)} $(BIN)/nsscaler --dry-run

manifests: install ## render an overlay (OVERLAY=prod|dry-run|local)
	@$(BIN)/kubectl kustomize kustomize/overlays/$(OVERLAY)

image: ## build the container image from the locks (no Docker engine: buildah, offline, localhost/nsscaler; SBOM in the cache)
	@if command -v docker >/dev/null; then docker build -t $(IMAGE):$(TAG) .; \
	else $(PYTHON) -m devtools.cluster.images project; fi

push: image ## push the container image
	docker push $(IMAGE):$(TAG)

deploy: install ## kubectl apply -k the overlay (OVERLAY=prod|dry-run) to the current cluster
	$(BIN)/kubectl apply -k kustomize/overlays/$(OVERLAY)

release: install ## suspend the CronJob for good, give back every workload nsscaler holds (fails naming what it could not)
	$(BIN)/nsscaler release --own-namespace $(NAMESPACE)

undeploy: release ## the release (the CronJob suspended, everything given back, or stop naming what is left), then remove what deploy applied
	$(BIN)/kubectl delete -k kustomize/overlays/$(OVERLAY) --ignore-not-found

run-now: install ## trigger a run now: kubectl create job --from=cronjob/nsscaler
	$(BIN)/kubectl -n $(NAMESPACE) create job --from=cronjob/nsscaler $(JOB)

.PHONY: help install lock docs rows control-plane metrics-tools operator-tools metrics-manifests lint test test-slow test-versions \
	test-unit mutation cluster-up cluster-down demo bench bench-wake gateway-crds gateway-tools run dry-run manifests image push deploy undeploy release run-now helm \
	chart package krew plugin-archive keep-release versions-table node-deps node-binaries \
	node-images test-node node-up node-down publish publish-tools
