package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/kube"
	"github.com/svcdns/svc/internal/store/storetest"
	"github.com/svcdns/svc/internal/validation"
	"github.com/svcdns/svc/test/kube/kubeenv"
)

var (
	env       *kubeenv.Env
	skip      string
	testNS    = []string{"default", "ns", "other", "a", "b", "c", kube.DefaultNamespace}
	testKey   = []byte("0123456789abcdef0123456789abcdef")
	validator *validation.Validator
)

func TestMain(m *testing.M) {
	if skip = kubeenv.SkipReason(); skip != "" {
		os.Exit(m.Run())
	}
	var err error
	if env, err = kubeenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	func() {
		defer func() {
			if err := env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop envtest:", err)
			}
		}()
		if err := env.Namespaces(context.Background(), testNS...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		if validator, err = validation.New(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		code = m.Run()
	}()
	os.Exit(code)
}

func needEnv(t *testing.T) {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
}

// wipe deletes every object the store keeps so each test starts empty.
func wipe(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	kinds, err := kube.CRDKinds()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		gvr := schema.GroupVersionResource{Group: "service.io", Version: "v1alpha1", Resource: strings.ToLower(k) + "s"}
		if k == "Policy" {
			gvr.Resource = "policies"
		}
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", k, err)
		}
		for _, it := range list.Items {
			if err := dyn.Resource(gvr).Namespace(it.GetNamespace()).Delete(ctx, it.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete %s/%s: %v", k, it.GetName(), err)
			}
		}
	}
	sec := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	if err := dyn.Resource(sec).Namespace(kube.DefaultNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kube.KindLabel}); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, cfg *rest.Config, opts kube.Options) (*kube.Driver, store.Store) {
	t.Helper()
	if opts.EncryptionKey == nil {
		opts.EncryptionKey = testKey
	}
	d, err := kube.Open(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, store.New(d, validator)
}

func TestConformance(t *testing.T) {
	needEnv(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		wipe(t)
		_, s := open(t, env.Config, kube.Options{})
		return s
	})
}

func TestRefusesWithoutKey(t *testing.T) {
	needEnv(t)
	if _, err := kube.Open(t.Context(), env.Config, kube.Options{}); err == nil || !strings.Contains(err.Error(), "encryption key") {
		t.Fatalf("open without a key: %v, want a refusal naming the encryption key", err)
	}
}

func localUser(name, hash string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": "LocalUser",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"username": name, "passwordHash": hash},
	}}
}

func TestInternalKindsAreSealedSecrets(t *testing.T) {
	needEnv(t)
	wipe(t)
	ctx := t.Context()
	_, s := open(t, env.Config, kube.Options{})
	hash := "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA"
	r, err := s.Apply(ctx, localUser("alice", hash), store.ApplyOptions{Manager: store.ManagerAPI})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(r.Object.Object, "spec", "passwordHash"); got != hash {
		t.Fatalf("returned hash %q", got)
	}
	got, err := s.Get(ctx, "LocalUser", "", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(got.Object, "spec", "passwordHash"); h != hash || got.GetResourceVersion() != r.ResourceVersion {
		t.Fatalf("read back hash %q at %s", h, got.GetResourceVersion())
	}
	// The Secret holds the object with the hash sealed.
	dyn := dynamic.NewForConfigOrDie(env.Config)
	secs, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(kube.DefaultNamespace).
		List(ctx, metav1.ListOptions{LabelSelector: kube.KindLabel + "=LocalUser"})
	if err != nil || len(secs.Items) != 1 {
		t.Fatalf("secrets: %v %v", secs, err)
	}
	sec := secs.Items[0]
	if sec.GetName() != "localuser.alice" {
		t.Fatalf("secret name %q", sec.GetName())
	}
	raw, _, _ := unstructured.NestedString(sec.Object, "data", "object")
	if strings.Contains(raw, "YXJnb24y") || raw == "" { // base64 of "argon2"
		t.Fatal("password hash stored in the clear")
	}
	// Another key cannot read it; the previous-key slot can.
	other := []byte("ffffffffffffffffffffffffffffffff")
	_, s2 := open(t, env.Config, kube.Options{EncryptionKey: other, PreviousEncryptionKey: testKey})
	got2, err := s2.Get(ctx, "LocalUser", "", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(got2.Object, "spec", "passwordHash"); h != hash {
		t.Fatal("previous key did not open the sealed field")
	}
	// Ownership is the store's, as in every driver.
	if _, err := s.Apply(ctx, localUser("alice", hash), store.ApplyOptions{Manager: "file:x"}); !errors.As(err, new(*store.ManagedByError)) {
		t.Fatalf("apply by another manager: %v", err)
	}
	// Watch sees internal kinds.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Watch(wctx, store.WatchOptions{Kind: "LocalUser"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != store.Added || ev.Object.GetName() != "alice" {
			t.Fatalf("event %s %v", ev.Type, ev.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no initial event")
	}
	if err := s.Delete(ctx, "LocalUser", "", "alice", store.DeleteOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "LocalUser", "", "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestOutageServesCacheAndStalenessGrows(t *testing.T) {
	needEnv(t)
	wipe(t)
	ctx := t.Context()
	host := strings.TrimSuffix(strings.TrimPrefix(env.Config.Host, "https://"), "/")
	p := kubeenv.NewProxy(t, host)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + p.Addr
	cfg.Timeout = 2 * time.Second
	d, s := open(t, cfg, kube.Options{ProbeInterval: 200 * time.Millisecond})
	if _, err := s.Apply(ctx, storetest.Zone("example.com", ""), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	// a connected driver's snapshot is confirmed every ProbeInterval; on a
	// loaded machine a probe can take a while, so wait for one to land
	for deadline := time.Now().Add(10 * time.Second); d.SnapshotAge(time.Now()) > time.Second; {
		if time.Now().After(deadline) {
			t.Fatalf("connected driver is %s old after 10s of probes", d.SnapshotAge(time.Now()))
		}
		time.Sleep(50 * time.Millisecond)
	}

	p.Cut()
	time.Sleep(2500 * time.Millisecond)
	if _, err := s.Get(ctx, store.KindDNSZone, "", "example.com"); err != nil {
		t.Fatalf("read during the outage: %v", err)
	}
	if l, err := s.List(ctx, store.ListOptions{Kind: store.KindDNSZone}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list during the outage: %d %v", len(l.Items), err)
	}
	age := d.SnapshotAge(time.Now())
	if age < 2*time.Second || d.Fresh(time.Now(), time.Second) {
		t.Fatalf("staleness during the outage: %s, want >= 2s and not fresh for maxAge 1s", age)
	}
	// Someone else writes while this driver cannot see it.
	_, direct := open(t, env.Config, kube.Options{})
	if _, err := direct.Apply(ctx, storetest.Zone("example.net", ""), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}

	p.Restore(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.Get(ctx, store.KindDNSZone, "", "example.net")
		if err == nil && d.SnapshotAge(time.Now()) < time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the outage: age %s, get %v", d.SnapshotAge(time.Now()), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
