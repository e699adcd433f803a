# The service: DNS filtering and authoritative DNS server.
GO ?= go
BIN := bin/svc
VERSION ?= 0.1.0-rc.1
LDFLAGS := -X github.com/svcdns/svc/internal/version.Version=$(VERSION)
# controller-gen runs from the module proxy at a pinned version, isolated from go.mod.
CONTROLLER_GEN := GOFLAGS= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
TEST_TIMEOUT ?= 20m

.PHONY: all build run first-build-notice install test test-deps screenshots bench generate manifests lint fmt vet clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/svc

# install needs a binary but does not rebuild one that exists, so that
# `make build && sudo make install` does not compile as root.
$(BIN):
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

## install: bin/svc, the systemd unit and an example config (packaging/).
## Never starts or enables anything and never overwrites an existing
## /etc/service/service.yaml (the example also goes to service.yaml.example).
## DESTDIR stages the files elsewhere (make install DESTDIR=/tmp/x works
## without root); PREFIX (/usr/local), SYSCONFDIR (/etc) and UNITDIR move them.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
DOCDIR ?= $(PREFIX)/share/doc/svc
INSTALL ?= install

install: $(BIN)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/service/objects.d $(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/svc
	sed -e 's#/usr/local/bin/svc#$(BINDIR)/svc#' -e 's#/etc/service/#$(SYSCONFDIR)/service/#' \
		packaging/systemd/svc.service > $(DESTDIR)$(UNITDIR)/svc.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/svc.service.tmp
	mv $(DESTDIR)$(UNITDIR)/svc.service.tmp $(DESTDIR)$(UNITDIR)/svc.service
	$(INSTALL) -m 0644 packaging/service.yaml $(DESTDIR)$(SYSCONFDIR)/service/service.yaml.example
	test -e $(DESTDIR)$(SYSCONFDIR)/service/service.yaml || \
		$(INSTALL) -m 0644 packaging/service.yaml $(DESTDIR)$(SYSCONFDIR)/service/service.yaml
	$(INSTALL) -m 0644 docs/admin-guide.md $(DESTDIR)$(DOCDIR)/admin-guide.md
	@echo "installed svc in $(DESTDIR)$(BINDIR), the unit in $(DESTDIR)$(UNITDIR); next: docs/admin-guide.md (systemctl daemon-reload, systemctl enable --now svc)"

## test: installs what the tests need (hack/), then runs every test.
test: test-deps
	assets="$$(hack/kube-testenv.sh)" && \
	KUBEBUILDER_ASSETS="$$assets" $(GO) test -timeout $(TEST_TIMEOUT) ./...
	GO=$(GO) hack/fuzz-ci.sh

test-deps:
	hack/install-dns-clients.sh
	hack/build-external-dns.sh
	hack/install-browser.sh

## screenshots: every dashboard page (desktop and 360 px) into docs/dashboard/,
## taken by test/dashboard in headless Chromium.
screenshots:
	hack/install-browser.sh
	mkdir -p docs/dashboard
	SCREENSHOTS=$(CURDIR)/docs/dashboard $(GO) test ./test/dashboard -count=1 -timeout 10m

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
