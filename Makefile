# Monorepo tasks. Every target goes through uv; nothing assumes an activated venv.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

export UV_PYTHON_DOWNLOADS := never
# uv on PATH, else the copy `make uv` installs into .tools/uv (the system Python is never touched).
UV_HOME  := $(CURDIR)/.tools/uv
UV       ?= $(shell command -v uv 2>/dev/null || echo $(UV_HOME)/bin/uv)
export UV
UV_RUN   := $(UV) run --all-packages --all-extras
PYTEST   := $(UV_RUN) pytest
PKG      ?=
FULL     ?=
PKGS     := $(notdir $(wildcard packages/*))
# test roots that exist (packages/ is absent from a clone until the first package lands)
TEST_DIRS := $(wildcard shared/tests shared/src packages tests)
# `make test PKG=core` (or methodkit) targets shared/; anything else packages/<PKG>
PKG_DIR   = $(if $(filter core methodkit,$(PKG)),shared,packages/$(PKG))

.PHONY: help uv system-deps sync lock test-all test-fast test bench reproduce typecheck lint format build-all \
        check-wheel check-wheels readme new-package clean _need-pkg

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

uv: ## bootstrap uv into .tools/uv if it is missing (needs only python3 + pip; works on PEP 668 systems)
	@$(UV) --version >/dev/null 2>&1 || { echo "installing uv into $(UV_HOME)"; \
	    python3 -m pip install -q --disable-pip-version-check --target "$(UV_HOME)" "uv>=0.13,<0.14"; }

system-deps: ## apt packages some packages use (tesseract-ocr); never fails, says what is missing
	@bash scripts/system_deps.sh

sync: uv system-deps ## install every package (editable), all extras and dev tools into .venv
	$(UV) sync --locked --all-packages --all-extras --compile-bytecode

lock: uv ## re-resolve uv.lock after editing any pyproject.toml
	$(UV) lock

test-all: sync ## every test in the repo except `bench` (this is what CI runs)
	$(PYTEST) -m "not bench" --durations=15 $(TEST_DIRS)

test-fast: sync ## like test-all, without `slow` tests
	$(PYTEST) -m "not bench and not slow" $(TEST_DIRS)

test: _need-pkg ## tests of one package: make test PKG=ess-flow
	$(PYTEST) -m "not bench" $(PKG_DIR)/tests $(PKG_DIR)/src

bench: _need-pkg ## full reproduction of one package into its bench/results, then its README block
	$(UV_RUN) python $(PKG_DIR)/bench/run.py
	$(UV_RUN) python -m methodkit.bench.readme $(PKG_DIR)
	$(PYTEST) -m bench $(PKG_DIR)/tests || [ $$? -eq 5 ]

readme: ## regenerate README bench blocks from committed records (PKG=x for one package)
	$(UV_RUN) python -m methodkit.bench.readme $(if $(PKG),$(PKG_DIR),$(wildcard packages/*))

reproduce: sync ## the main job: every bench --quick (FULL=1: full runs; PKG=x: one) -> results/REPORT.md
	$(UV_RUN) python scripts/reproduce.py $(if $(FULL),--full) $(if $(PKG),--package $(PKG))

typecheck: ## mypy over the core's and every package's src/ (settings in the root pyproject)
	$(UV_RUN) mypy shared/src $(wildcard packages/*/src)

lint: ## ruff lint + format check (CI gate)
	$(UV_RUN) ruff check .
	$(UV_RUN) ruff format --check .

format: ## apply ruff fixes and formatting
	$(UV_RUN) ruff check --fix .
	$(UV_RUN) ruff format .

build-all: ## sdists + wheels of the core and every package into dist/
	rm -rf dist
	$(UV) build --all-packages -o dist

check-wheel: _need-pkg ## install PKG's wheel alone in a fresh venv (core only if it needs it), run its fast tests
	$(UV_RUN) python scripts/check_wheel.py $(PKG)

check-wheels: ## check-wheel for every package
	@for p in $(PKGS); do echo "== $$p"; $(MAKE) --no-print-directory check-wheel PKG=$$p; done
	@[ -n "$(PKGS)" ] || echo "no package under packages/ yet: nothing to check"

new-package: ## start a package from the template: make new-package NAME=my-method
	@[ -n "$(NAME)" ] || { echo "set NAME=<distribution name>"; exit 2; }
	$(UV_RUN) python scripts/new_package.py $(NAME)

clean:
	rm -rf dist .pytest_cache .ruff_cache results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

_need-pkg:
	@[ -n "$(PKG)" ] || { echo "set PKG=<package dir name>, e.g. make $(MAKECMDGOALS) PKG=ess-flow"; exit 2; }
	@[ -d "$(PKG_DIR)" ] || { echo "no such package: $(PKG_DIR)"; exit 2; }
