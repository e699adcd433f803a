package node

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
)

func obj(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
}

func inlineList(rule string) map[string]any {
	return map[string]any{"sources": []any{map[string]any{"name": "main", "inline": []any{rule}}}}
}

// TestUpgradeGlobalLists opens a real SQLite file written under the old
// rule (lists named by a policy applied only to it) the way the node does:
// the named list gets spec.global false, the unnamed one stays global, a
// file-managed one is left to its file, and the upgrade runs only once.
func TestUpgradeGlobalLists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(ctx, filepath.Join(dir, "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	api := store.ApplyOptions{Manager: store.ManagerAPI}
	file := store.ApplyOptions{Manager: "file:/etc/service/objects/lists.yaml"}
	for _, a := range []struct {
		o    *unstructured.Unstructured
		opts store.ApplyOptions
	}{
		{obj("BlockList", "default", "ads", inlineList("||ads.example^")), api},
		{obj("BlockList", "default", "kids-extra", inlineList("||games.example^")), api},
		{obj("BlockList", "default", "homework-ok", map[string]any{"mode": "allow", "sources": inlineList("||school.example^")["sources"]}), api},
		{obj("BlockList", "default", "from-file", inlineList("||file.example^")), file},
		{obj("ClientGroup", "default", "kids", map[string]any{"addresses": []any{"127.0.0.2/31"}}), api},
		{obj("Policy", "default", "kids", map[string]any{"clientGroupRefs": []any{"kids"},
			"blockListRefs": []any{"kids-extra", "from-file"}, "allowListRefs": []any{"homework-ok"}}), api},
		// a refused tenant policy never took a list out of (global)
		{obj("Policy", "team", "all", map[string]any{"blockListRefs": []any{"default/ads"}}), api},
	} {
		if _, err := st.Apply(ctx, a.o, a.opts); err != nil {
			t.Fatalf("apply %s: %v", a.o.GetName(), err)
		}
	}
	st.Close()

	cfg := &settings.Config{}
	cfg.Node.DataDir, cfg.Store.Driver = dir, "sqlite"
	env := func(string) string { return "" }
	log := slog.New(slog.DiscardHandler)
	open := func() store.Store {
		t.Helper()
		o, err := openStore(ctx, cfg, env, v, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		return o.Store
	}
	global := func(st store.Store, name string) any {
		t.Helper()
		u, err := st.Get(ctx, "BlockList", "default", name)
		if err != nil {
			t.Fatal(err)
		}
		g, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "global")
		if !found {
			return "omitted"
		}
		return g
	}
	st = open()
	for name, want := range map[string]any{"ads": "omitted", "kids-extra": false, "homework-ok": false, "from-file": "omitted"} {
		if got := global(st, name); got != want {
			t.Errorf("after the upgrade %s spec.global = %v, want %v", name, got, want)
		}
	}
	// a list the user names later without spec.global is global: the
	// upgrade does not run again
	if _, err := st.Apply(ctx, obj("BlockList", "default", "later", inlineList("||later.example^")), api); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, obj("Policy", "default", "kids", map[string]any{"clientGroupRefs": []any{"kids"},
		"blockListRefs": []any{"kids-extra", "later"}}), api); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = open()
	if got := global(st, "later"); got != "omitted" {
		t.Errorf("the upgrade ran again: later spec.global = %v", got)
	}
}
