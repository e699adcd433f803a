# The service: DNS filtering and authoritative DNS server.
GO ?= go
BIN := bin/svc
VERSION ?= 0.1.0-rc.1
LDFLAGS := -X github.com/svcdns/svc/internal/version.Version=$(VERSION)
# controller-gen runs from the module proxy at a pinned version, isolated from go.mod.
CONTROLLER_GEN := GOFLAGS= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
TEST_TIMEOUT ?= 20m

.PHONY: all build run first-build-notice test test-deps bench generate manifests lint fmt vet clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/svc

## run: a node with the SQLite store on unprivileged loopback ports (hack/dev/service.yaml).
run: first-build-notice build
	mkdir -p .run
	$(GO) run ./hack/devcert .run/tls
	$(BIN) serve --config hack/dev/service.yaml

# Said before the build starts: on a fresh machine the first build compiles
# every dependency (the Kubernetes client libraries are most of it) with no
# output for several minutes, which reads as a hang.
first-build-notice:
	@test -x $(BIN) || echo "make run: the first build compiles svc and all its dependencies; this takes a few minutes (about 9 on 2 cores) with no output. Later builds reuse Go's build cache and take seconds."

## test: installs what the tests need (hack/), then runs every test.
test: test-deps
	assets="$$(hack/kube-testenv.sh)" && \
	KUBEBUILDER_ASSETS="$$assets" $(GO) test -timeout $(TEST_TIMEOUT) ./...

test-deps:
	hack/install-dns-clients.sh

## bench: every benchmark with allocations, plus the load harnesses.
bench: build
	hack/install-bench-deps.sh
	hack/bench.sh

## generate: deepcopy functions of the object types.
generate:
	$(CONTROLLER_GEN) object paths=./api/...

## manifests: CRDs (config/crd/bases) and the schemas of the internal kinds
## (config/crd/internal, never installed) from the kubebuilder markers.
manifests:
	GO=$(GO) hack/gen-internal-schemas.sh

lint: vet
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin .run
