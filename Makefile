# Monorepo tasks. Every target goes through uv; nothing assumes an activated venv.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

export UV_PYTHON_DOWNLOADS := never
# uv on PATH, else the copy `make uv` installs with pip (python3 -m uv).
UV       ?= $(shell command -v uv >/dev/null 2>&1 && echo uv || echo python3 -m uv)
UV_RUN   := $(UV) run --all-packages --all-extras
PYTEST   := $(UV_RUN) pytest
PKG      ?=
FULL     ?=
PKGS     := $(notdir $(wildcard packages/*))
# test roots that exist (packages/ is absent from a clone until the first package lands)
TEST_DIRS := $(wildcard shared/tests packages tests)
# `make test PKG=core` (or methodkit) targets shared/; anything else packages/<PKG>
PKG_DIR   = $(if $(filter core methodkit,$(PKG)),shared,packages/$(PKG))
WHEEL_OF  = dist/$(subst -,_,$(1))-*.whl

.PHONY: help uv sync lock test-all test-fast test bench reproduce lint format build-all \
        check-wheel check-wheels clean _need-pkg

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

uv: ## install uv with pip if it is missing (no other prerequisite than python3 + pip)
	@$(UV) --version >/dev/null 2>&1 || { echo "installing uv with pip"; \
	    python3 -m pip install -q --user "uv>=0.13,<0.14" || python3 -m pip install -q "uv>=0.13,<0.14"; }

sync: uv ## install every package (editable), all extras and dev tools into .venv
	$(UV) sync --locked --all-packages --all-extras

lock: uv ## re-resolve uv.lock after editing any pyproject.toml
	$(UV) lock

test-all: sync ## every test in the repo except `bench` (this is what CI runs)
	$(PYTEST) -m "not bench" --durations=15 $(TEST_DIRS)

test-fast: sync ## like test-all, without `slow` tests
	$(PYTEST) -m "not bench and not slow" $(TEST_DIRS)

test: _need-pkg ## tests of one package: make test PKG=ess-flow
	$(PYTEST) -m "not bench" $(PKG_DIR)/tests

bench: _need-pkg ## reproduction of one package: make bench PKG=esensc
	cd $(PKG_DIR) && $(UV_RUN) python bench/run.py --out bench/results
	$(PYTEST) -m bench $(PKG_DIR)/tests || [ $$? -eq 5 ]

reproduce: sync ## the main job: every bench --quick (FULL=1: full runs; PKG=x: one) -> results/REPORT.md
	$(UV_RUN) python scripts/reproduce.py $(if $(FULL),--full) $(if $(PKG),--package $(PKG))

lint: ## ruff lint + format check (CI gate)
	$(UV_RUN) ruff check .
	$(UV_RUN) ruff format --check .

format: ## apply ruff fixes and formatting
	$(UV_RUN) ruff check --fix .
	$(UV_RUN) ruff format .

build-all: ## sdists + wheels of the core and every package into dist/
	rm -rf dist
	$(UV) build --all-packages -o dist

check-wheel: _need-pkg ## build PKG + core wheels, install them into a fresh venv, run PKG's fast tests there
	$(UV) build -q --package methodkit --wheel -o dist
	$(UV) build -q --package $(PKG) --wheel -o dist
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(UV) venv -q "$$tmp/venv"; \
	$(UV) export -q --frozen --package $(PKG) --all-extras --no-dev --no-emit-workspace --no-hashes -o "$$tmp/pins.txt"; \
	$(UV) pip install -q --python "$$tmp/venv/bin/python" -c "$$tmp/pins.txt" \
	    $(call WHEEL_OF,$(PKG)) $(call WHEEL_OF,methodkit) pytest; \
	cd $(PKG_DIR) && "$$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow and not bench" tests

check-wheels: ## check-wheel for every package
	@for p in $(PKGS); do echo "== $$p"; $(MAKE) --no-print-directory check-wheel PKG=$$p; done
	@[ -n "$(PKGS)" ] || echo "no package under packages/ yet: nothing to check"

clean:
	rm -rf dist .pytest_cache .ruff_cache results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

_need-pkg:
	@[ -n "$(PKG)" ] || { echo "set PKG=<package dir name>, e.g. make $(MAKECMDGOALS) PKG=ess-flow"; exit 2; }
	@[ -d "$(PKG_DIR)" ] || { echo "no such package: $(PKG_DIR)"; exit 2; }
