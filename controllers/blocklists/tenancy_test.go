package blocklists

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/events"
	"github.com/svcdns/svc/internal/listfetch"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
)

// lineCount is a compiled source that only counts lines (the real
// compiler lives in the data plane, which controllers do not import).
type lineCount int

func (l lineCount) Counts() (int, int, int, int, int, []string) { return int(l), 0, 0, 0, int(l), nil }

type lineCompiler struct{}

func (lineCompiler) CompileSource(_ context.Context, _ v1alpha1.BlockListSource, body io.Reader) (lineCount, error) {
	b, err := io.ReadAll(body)
	return lineCount(strings.Count(string(b), "\n") + 1), err
}
func (lineCompiler) NewList(*v1alpha1.BlockList, []lineCount) int { return 0 }

// configMaps stands in for the apiserver and records every read.
type configMaps struct {
	mu    sync.Mutex
	reads []string
}

func (c *configMaps) ListBody(_ context.Context, ns, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads = append(c.reads, ns+"/"+name)
	return "secret.internal.example\n", nil
}

type recorded struct {
	mu  sync.Mutex
	got []string
}

func (r *recorded) Eventf(obj, _ runtime.Object, typ, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%s %s %s", typ, reason, fmt.Sprintf(note, args...)))
}

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.NewStore(t.Context(), filepath.Join(t.TempDir(), "state.db"), nil, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func put(t *testing.T, st store.Store, bl *v1alpha1.BlockList) {
	t.Helper()
	bl.APIVersion, bl.Kind = "service.io/v1alpha1", "BlockList"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bl)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	if _, err := st.Apply(t.Context(), &unstructured.Unstructured{Object: m}, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
}

func ready(t *testing.T, st store.Store, ns, name string) (string, string) {
	t.Helper()
	u, err := st.Get(t.Context(), Kind, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var bl v1alpha1.BlockList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &bl); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(bl.Status.Conditions, ConditionReady)
	if c == nil {
		return "", ""
	}
	return string(c.Status) + " " + c.Reason, c.Message
}

// TestConfigMapOtherNamespaceRefused: a configMapRef naming another
// namespace is never read (the service's credentials would read it for
// the tenant) and the list says why.
func TestConfigMapOtherNamespaceRefused(t *testing.T) {
	st := newStore(t)
	fetcher, err := listfetch.New(listfetch.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cms := &configMaps{}
	rec := New(Options[lineCount, int]{Store: st, Fetcher: fetcher, Compiler: lineCompiler{}, ConfigMaps: cms})
	bl := &v1alpha1.BlockList{Spec: v1alpha1.BlockListSpec{Sources: []v1alpha1.BlockListSource{
		{Name: "private", ConfigMapRef: &v1alpha1.ConfigMapRef{Name: "private-hosts", Namespace: "kube-system"}}}}}
	bl.Namespace, bl.Name = "intruder", "peek"
	put(t, st, bl)
	if _, err := rec.Reconcile(t.Context(), "intruder", "peek"); err != nil {
		t.Fatal(err)
	}
	if len(cms.reads) != 0 {
		t.Fatalf("ConfigMaps read: %v", cms.reads)
	}
	got, msg := ready(t, st, "intruder", "peek")
	if got != "False "+ReasonConfigMapNamespace || !strings.Contains(msg, "own namespace only") || !strings.Contains(msg, "kube-system/private-hosts") {
		t.Fatalf("Ready %s: %s", got, msg)
	}

	// its own namespace (named or implied) is read
	bl.Spec.Sources[0].ConfigMapRef.Namespace = "intruder"
	put(t, st, bl)
	if _, err := rec.Reconcile(t.Context(), "intruder", "peek"); err != nil {
		t.Fatal(err)
	}
	if got, msg := ready(t, st, "intruder", "peek"); got != "True "+ReasonCompiled || fmt.Sprint(cms.reads) != "[intruder/private-hosts]" {
		t.Fatalf("own namespace: Ready %s %s, reads %v", got, msg, cms.reads)
	}

	// the same rule without a ConfigMap reader (sqlite store)
	noCM := New(Options[lineCount, int]{Store: st, Fetcher: fetcher, Compiler: lineCompiler{}})
	bl.Spec.Sources[0].ConfigMapRef.Namespace = "kube-system"
	put(t, st, bl)
	if _, err := noCM.Reconcile(t.Context(), "intruder", "peek"); err != nil {
		t.Fatal(err)
	}
	if got, _ := ready(t, st, "intruder", "peek"); got != "False "+ReasonConfigMapNamespace {
		t.Fatalf("sqlite: Ready %s", got)
	}
}

// TestEventsOnFailureAndRecovery: a dead URL records one Warning (not one
// per resync), and a Normal Event when the list recovers.
func TestEventsOnFailureAndRecovery(t *testing.T) {
	st := newStore(t)
	fetcher, err := listfetch.New(listfetch.Options{Dir: t.TempDir(), AllowLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	// a port nothing listens on: bind, note, close
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/list.txt"
	l.Close()
	evs := &recorded{}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := New(Options[lineCount, int]{Store: st, Fetcher: fetcher, Compiler: lineCompiler{},
		Events: events.NewReporter(evs, "Reconcile"), Now: func() time.Time { return now }})
	bl := &v1alpha1.BlockList{Spec: v1alpha1.BlockListSpec{Sources: []v1alpha1.BlockListSource{{Name: "remote", URL: dead}}}}
	bl.Namespace, bl.Name = "team", "dead"
	put(t, st, bl)
	for range 3 {
		if _, err := rec.Reconcile(t.Context(), "team", "dead"); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Minute)
	}
	if len(evs.got) != 1 || !strings.HasPrefix(evs.got[0], "Warning "+ReasonSourceFailed+" remote: ") {
		t.Fatalf("events after 3 failing reconciles: %q", evs.got)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "a.example\nb.example\n") })}
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	bl.Spec.Sources[0].URL = "http://" + l.Addr().String() + "/list.txt"
	put(t, st, bl)
	if _, err := rec.Reconcile(t.Context(), "team", "dead"); err != nil {
		t.Fatal(err)
	}
	if len(evs.got) != 2 || !strings.HasPrefix(evs.got[1], "Normal "+ReasonCompiled) {
		t.Fatalf("events after recovery: %q", evs.got)
	}
}
