# godist: the two commands of the README are `make quickstart` and `make test`.
GO       ?= go
BIN      := bin/godist
PYTHON   ?= /usr/bin/python3
# The Go kernels (AVX-512 or AVX2 assembly as the CPU allows) are the default: on the course's
# CNN they run the training step twice as fast as the OpenBLAS build (bench/RESULTS.md, cnn).
# TAGS=openblas builds the matrix multiply on OpenBLAS (cgo, libopenblas-dev); `make test`
# also tests the tensor package in that build when cblas.h is present.
TAGS     ?=
GOFLAGS_TAGS := $(if $(TAGS),-tags '$(TAGS)',)
HAVE_CBLAS := $(shell [ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || [ -e /usr/include/openblas/cblas.h ] && echo yes)
TESTTIMEOUT ?= 40m

.PHONY: all build deps install uninstall quickstart test test-short cross staticcheck bench generate check-generate vet clean

all: build

build:
	$(GO) build $(GOFLAGS_TAGS) -o $(BIN) ./cmd/godist

deps:
	bash installer/deps.sh

# install builds the kernel, writes the "godist" kernelspec for the current user and enables
# the Notebook widget extension where it is not (one "widgets:" line says which).
install: build
	$(BIN) install --user

uninstall: build
	$(BIN) install --uninstall

# MNIST for the notebooks: GODIST_DATA_DIR when set, else ../shared/data/mnist beside the
# checkout when it exists (no download needed); otherwise the loader downloads into its cache.
GODIST_DATA_DIR ?= $(if $(wildcard $(CURDIR)/../shared/data/mnist),$(abspath $(CURDIR)/../shared/data/mnist),)

# quickstart: the main job. Installs what is missing, the kernel, and executes the quickstart
# notebook headless (training on MNIST over logical CPU devices), writing the executed copy.
quickstart: deps install
	mkdir -p out
	$(if $(GODIST_DATA_DIR),GODIST_DATA_DIR='$(GODIST_DATA_DIR)') \
	$(PYTHON) -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=1200 \
		--ExecutePreprocessor.kernel_name=godist --output-dir out notebooks/quickstart.ipynb
	@$(PYTHON) -c 'import json; nb = json.load(open("out/quickstart.ipynb")); \
	  outs = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stdout"]; \
	  print("".join("".join(o["text"]) for o in outs if "Eval" in "".join(o["text"]) or "Number of devices" in "".join(o["text"])), end="")'
	@echo "executed notebook: out/quickstart.ipynb"

test: build cross staticcheck
	$(GO) vet $(GOFLAGS_TAGS) ./...
	$(GO) test $(GOFLAGS_TAGS) -timeout $(TESTTIMEOUT) ./...
	$(if $(HAVE_CBLAS),$(GO) test -tags openblas ./distlib/tensor ./distlib/optim)

# cross: everything builds and vets (test files included) for macOS on Apple silicon and Intel
# and for Linux on arm64, and the packages with architecture- or OS-specific code (assembly
# and its Go fallbacks, getg, shared-memory collectives and futexes, fd redirection) pass
# their short tests as linux/arm64 binaries under qemu-user (Debian's qemu-user: make deps).
# Skipped under qemu, each for a reason of the emulator, not of arm64:
#   TestUnboundedRecursion: recursing to yaegi's depth bound takes minutes emulated;
#   Test*SharedMemoryTwoProcesses: they start the test binary again, which the host cannot
#     execute without qemu's binfmt registration;
#   TestGRPCSharedMemoryFull: it maps a region twice /dev/shm's size, more address space than
#     qemu-user gives a guest.
CROSS_TARGETS := darwin/arm64 darwin/amd64 linux/arm64
QEMU_AARCH64  ?= qemu-aarch64
ARM64_TEST_PKGS := ./internal/goid ./internal/simd ./distlib/device ./distlib/tensor ./distlib/optim \
	./distlib/collective ./distlib/transport ./interp ./kernel
ARM64_TEST_SKIP := ^(TestUnboundedRecursion|TestGRPCSharedMemoryTwoProcesses|TestPSSharedMemoryTwoProcesses|TestGRPCSharedMemoryFull)$$

cross:
	@set -e; for t in $(CROSS_TARGETS); do \
	  echo "cross: $$t: go build ./... && go vet ./..."; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build ./...; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet ./...; \
	done
	@command -v $(QEMU_AARCH64) >/dev/null || \
	  { echo "cross: $(QEMU_AARCH64) not found: install Debian's qemu-user (make deps) to run the linux/arm64 tests"; exit 1; }
	@echo "cross: linux/arm64 tests under $(QEMU_AARCH64)"
	GOOS=linux GOARCH=arm64 $(GO) test -exec $(QEMU_AARCH64) -short -timeout 15m \
		-skip '$(ARM64_TEST_SKIP)' $(ARM64_TEST_PKGS)

# staticcheck (honnef.co/go/tools, fetched through the module proxy at the pinned version) over
# the module; an exception is a //lint:ignore line with its reason where the code is.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

staticcheck:
	$(STATICCHECK) $(GOFLAGS_TAGS) ./...

test-short:
	$(GO) test $(GOFLAGS_TAGS) -short ./...

bench: build
	bash bench/run.sh

# The project's own generators: interp/internal/syntax is Go's parser copied unmodified, and
# its go:generate lines (stringer) belong to the Go tree it came from.
GENERATE_PKGS := ./interp/symbols ./gpu/kernels

generate:
	$(GO) generate $(GENERATE_PKGS)

# check-generate fails when the committed yaegi symbols differ from what distlib's API makes,
# or when third_party/yaegi is not upstream yaegi + third_party/yaegi-patches.
check-generate: generate
	@git diff --exit-code --stat -- interp/symbols || (echo "interp/symbols is stale: run make generate and commit it" && exit 1)
	@bash third_party/yaegi-sync.sh check

clean:
	rm -rf bin out
