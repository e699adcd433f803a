package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
)

// failingStore refuses every ClientGroup write with err.
type failingStore struct {
	store.Store
	err error
}

func (f failingStore) Apply(ctx context.Context, obj *unstructured.Unstructured, opts store.ApplyOptions) (store.ApplyResult, error) {
	if obj.GetKind() == "ClientGroup" {
		return store.ApplyResult{}, f.err
	}
	return f.Store.Apply(ctx, obj, opts)
}

// lockedBuffer is a log sink for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// line returns the log line holding s.
func (l *lockedBuffer) line(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ln := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(ln, s) {
			return ln
		}
	}
	return ""
}

// kubeRefusal is shaped like the kube store's refusals of the service's
// own credentials (internal/store/kube.RefusedError).
type kubeRefusal struct{}

func (kubeRefusal) Error() string {
	return `clientgroups.service.io "lab" is forbidden: User "system:serviceaccount:dns:svc" cannot create resource "clientgroups"`
}
func (kubeRefusal) ErrorKey() string { return KeyForbidden }
func (kubeRefusal) HTTPStatus() int  { return http.StatusForbidden }
func (kubeRefusal) ErrorMessage() string {
	return "the service's Kubernetes credentials may not create clientgroups"
}
func (kubeRefusal) ErrorHint() string { return "grant it in the chart's ClusterRole" }
func (kubeRefusal) MissingPermission() string {
	return "kubernetes: create clientgroups.service.io in namespace default"
}
func (kubeRefusal) RetryAfter() time.Duration { return 0 }
func (kubeRefusal) ServerFault() bool         { return true }

func envWithFailingStore(t *testing.T, fail error) (*testEnv, *lockedBuffer) {
	logs := &lockedBuffer{}
	e := newEnv(t, func(_ *Options, d *Deps) {
		d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	e.srv.deps.Store = failingStore{Store: e.st, err: fail}
	return e, logs
}

var clientGroup = map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "ClientGroup",
	"metadata": map[string]any{"name": "lab", "namespace": "default"}, "spec": map[string]any{"addresses": []any{"10.0.0.0/8"}}}

// A refusal of the service's own credentials answers with its key, status,
// hint and missing permission; the request's log line carries the cause at
// ERROR.
func TestServerRefusalAnswersAndLogs(t *testing.T) {
	e, logs := envWithFailingStore(t, kubeRefusal{})
	c := e.withToken(e.adminToken())
	r := c.do("POST", "/apply", clientGroup, "X-Request-ID", "refusal-1")
	if r.code != http.StatusForbidden || r.errKey(t) != KeyForbidden {
		t.Fatalf("got %d %s, want 403 forbidden", r.code, r.body)
	}
	er := r.json(t)["error"].(map[string]any)
	if er["missing"] != "kubernetes: create clientgroups.service.io in namespace default" || er["hint"] != "grant it in the chart's ClusterRole" {
		t.Fatalf("error body %s does not name the permission and the fix", r.body)
	}
	ln := logs.line("request_id=refusal-1")
	if !strings.Contains(ln, "level=ERROR") || !strings.Contains(ln, "error_key=forbidden") || !strings.Contains(ln, `cannot create resource`) {
		t.Fatalf("log line %q lacks the level or the cause", ln)
	}
}

// An unknown error answers 500 internal without its text; the text is
// logged under the request id at ERROR.
func TestInternalErrorLogsCause(t *testing.T) {
	e, logs := envWithFailingStore(t, errors.New("disk on fire"))
	c := e.withToken(e.adminToken())
	r := c.do("POST", "/apply", clientGroup, "X-Request-ID", "internal-1")
	if r.code != http.StatusInternalServerError || r.errKey(t) != KeyInternal {
		t.Fatalf("got %d %s, want 500 internal", r.code, r.body)
	}
	if strings.Contains(string(r.body), "disk on fire") {
		t.Fatalf("the cause leaked to the caller: %s", r.body)
	}
	ln := logs.line("request_id=internal-1")
	if !strings.Contains(ln, "level=ERROR") || !strings.Contains(ln, "disk on fire") || !strings.Contains(ln, "status=500") {
		t.Fatalf("log line %q lacks the level or the cause", ln)
	}
	// A handled client error stays at INFO, with its key.
	r = c.do("POST", "/apply", map[string]any{"kind": "Nope"}, "X-Request-ID", "client-1")
	if r.code != http.StatusBadRequest {
		t.Fatalf("got %d %s", r.code, r.body)
	}
	if ln := logs.line("request_id=client-1"); !strings.Contains(ln, "level=INFO") || !strings.Contains(ln, "error_key=invalid") {
		t.Fatalf("log line %q", ln)
	}
}
