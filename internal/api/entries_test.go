package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
)

// TestEntriesAcrossLists: GET /entries lists the entries of every list of
// an action and namespace with total, matched, lists (DomainListInfo) and
// unattached (DomainUnattached); POST /entries creates the default list,
// confines entries to groups, refuses unknown groups and a list of the
// other action, and an operator may write while a viewer may only read.
func TestEntriesAcrossLists(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(o *Options, d *Deps) {
		bindRoles(o)
		d.BlockListRules = inlineRules{}
	})
	op := roleToken(t, e, "op", auth.RoleOperator)
	view := roleToken(t, e, "view", auth.RoleViewer)
	put := func(kind, ns, name string, spec map[string]any, manager store.Manager) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": kind,
			"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
		if _, err := e.st.Apply(ctx, obj, store.ApplyOptions{Manager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	put("ClientGroup", "default", "kids", map[string]any{"addresses": []any{"10.0.0.0/24"}}, store.ManagerAPI)
	put("ClientGroup", "home", "guests", map[string]any{"addresses": []any{"10.0.2.0/24"}}, store.ManagerAPI)
	// a non-global list no policy names, with a policy from a file: unattached
	put("BlockList", "default", "games", map[string]any{"global": false, "sources": []any{map[string]any{"name": "main",
		"inline": []any{"||games.example^"}, "entries": []any{map[string]any{"value": "chess.example"}}}}}, store.ManagerAPI)
	put("Policy", "default", "from-file", map[string]any{"clientGroupRefs": []any{"kids"}}, "file:objects.d/policy.yaml")
	put("BlockList", "home", "ok", map[string]any{"mode": "allow", "sources": []any{map[string]any{"name": "manual",
		"entries": []any{map[string]any{"value": "fine.example"}}}}}, store.ManagerAPI)

	if r := view.do("POST", "/entries", map[string]any{"action": "block", "values": []string{"x.example"}}); r.code != 403 {
		t.Fatalf("viewer POST /entries: %d %s", r.code, r.body)
	}
	r := op.do("POST", "/entries", map[string]any{"action": "block", "values": []string{"Games.Example.", "tv.example"}, "groups": []string{"kids", "home/guests"}, "comment": "evenings"})
	if r.code != 201 {
		t.Fatalf("POST /entries: %d %s", r.code, r.body)
	}
	var de DomainEntries
	_ = json.Unmarshal(r.body, &de)
	if len(de.Items) != 2 || de.Items[0].Value != "games.example" || strings.Join(de.Items[0].Groups, ",") != "default/kids,home/guests" ||
		de.Lists[0].List != "default/ui-deny" || !de.Lists[0].Global || de.Items[0].Action != "block" {
		t.Fatalf("created: %s", r.body)
	}
	// the same value for everyone is another entry; again for the same groups is not
	r = op.do("POST", "/entries", map[string]any{"action": "block", "values": []string{"games.example"}})
	_ = json.Unmarshal(r.body, &de)
	if r.code != 201 || de.Total != 3 {
		t.Fatalf("for everyone: %d %s", r.code, r.body)
	}
	r = op.do("POST", "/entries", map[string]any{"action": "block", "values": []string{"games.example"}, "groups": []string{"home/guests", "default/kids"}})
	_ = json.Unmarshal(r.body, &de)
	if r.code != 201 || de.Total != 3 {
		t.Fatalf("same groups again: %d %s", r.code, r.body)
	}
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"action": "block", "values": []string{"x.example"}, "groups": []string{"kid"}}, `did you mean \"default/kids\"`},
		{map[string]any{"action": "block", "values": []string{"x.example"}, "groups": make([]string, 101)}, "groups"},
		{map[string]any{"action": "allow", "list": "games", "values": []string{"x.example"}}, "is a block list"},
		{map[string]any{"action": "maybe", "values": []string{"x.example"}}, "action"},
	} {
		if r := op.do("POST", "/entries", tc.body); r.code != 400 || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%v: %d %s", tc.body, r.code, r.body)
		}
	}

	// The view across lists.
	r = view.do("GET", "/entries?action=block&namespace=default", nil)
	_ = json.Unmarshal(r.body, &de)
	if r.code != 200 || de.Total != 4 || de.Matched != 4 || len(de.Lists) != 2 || de.RulesKnown {
		t.Fatalf("block view: %d %s", r.code, r.body)
	}
	if de.Lists[0].List != "default/games" || de.Lists[0].Global || de.Lists[0].Entries != 1 || de.Lists[1].List != "default/ui-deny" || de.Lists[1].Entries != 3 {
		t.Errorf("lists: %+v", de.Lists)
	}
	if len(de.Unattached) != 1 || de.Unattached[0].Policy != "default/from-file" || de.Unattached[0].List != "default/games" ||
		de.Unattached[0].ManagedBy != "file:objects.d/policy.yaml" || de.Unattached[0].Hint == "" {
		t.Errorf("unattached: %+v", de.Unattached)
	}
	r = view.do("GET", "/entries?action=block&rules=true&q=games", nil)
	_ = json.Unmarshal(r.body, &de)
	if de.Total != 5 || de.Matched != 3 || !de.RulesKnown {
		t.Errorf("with rules, q=games: %s", r.body)
	}
	r = view.do("GET", "/entries?group=home/guests", nil)
	_ = json.Unmarshal(r.body, &de)
	if de.Matched != 2 || de.Items[0].List != "default/ui-deny" {
		t.Errorf("group filter: %s", r.body)
	}
	r = view.do("GET", "/entries?action=allow&limit=1", nil)
	_ = json.Unmarshal(r.body, &de)
	if de.Total != 1 || len(de.Items) != 1 || de.Items[0].Action != "allow" || de.Lists[0].Action != "allow" || de.Continue != "" {
		t.Errorf("allow view: %s", r.body)
	}
	if r := view.do("GET", "/entries?continue=bogus", nil); r.code != 400 {
		t.Errorf("bad continue: %d", r.code)
	}
	// Items keep their source's ids: the per-source PATCH switches them.
	r = view.do("GET", "/entries?action=block&namespace=default&list=ui-deny&group=kids", nil)
	_ = json.Unmarshal(r.body, &de)
	if len(de.Items) != 2 {
		t.Fatalf("kids entries: %s", r.body)
	}
	if r := op.do("PATCH", "/blocklists/default/ui-deny/sources/manual/entries", map[string]any{"ids": []string{de.Items[0].ID}, "op": "disable"}); r.code != 200 {
		t.Fatalf("patch by view id: %d %s", r.code, r.body)
	}
	r = view.do("GET", "/entries?list=ui-deny&enabled=false", nil)
	_ = json.Unmarshal(r.body, &de)
	if de.Matched != 1 || len(de.Items[0].Groups) != 2 {
		t.Errorf("disabled: %s", r.body)
	}
}

// TestCatalogueIcons: GET /catalogue/icons lists a CatalogueIcon per
// service whose paths serve the icon and its dark variant.
func TestCatalogueIcons(t *testing.T) {
	cat, err := catalogue.Builtin(context.Background(), 6)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options, d *Deps) {
		bindRoles(o)
		d.Catalogue = catalogueAdapter{cat}
	})
	view := roleToken(t, e, "view", auth.RoleViewer)
	r := view.do("GET", "/catalogue/icons", nil)
	var body ListBody[CatalogueIcon]
	if err := json.Unmarshal(r.body, &body); r.code != 200 || err != nil || len(body.Items) < 10 {
		t.Fatalf("icons: %d %s", r.code, r.body)
	}
	var yt *CatalogueIcon
	for i := range body.Items {
		if body.Items[i].ID == "youtube" {
			yt = &body.Items[i]
		}
	}
	if yt == nil || yt.Path != "/api/v1/catalogue/icons/youtube.svg" || yt.OnDark != "/api/v1/catalogue/icons/youtube.svg?variant=onDark" {
		t.Fatalf("youtube icon: %+v", yt)
	}
	for _, p := range []string{yt.Path, yt.OnDark} {
		r := view.do("GET", strings.TrimPrefix(p, "/api/v1"), nil)
		if r.code != 200 || !strings.Contains(string(r.body), "<svg") {
			t.Errorf("GET %s: %d", p, r.code)
		}
	}
}
