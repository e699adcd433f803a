package api

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
)

// storeAudiences is the node's adapter in small: policy.Audience and
// policy.Note over the objects of the store.
type storeAudiences struct{ st store.Store }

func (storeAudiences) PolicyState(context.Context, string, string) (PolicyState, bool, error) {
	return PolicyState{}, false, nil
}

func (a storeAudiences) input(ctx context.Context) policy.Input {
	in := policy.Input{Tenancy: &policy.Tenancy{GlobalNamespaces: []string{"default"}}}
	lists, _ := a.st.List(ctx, store.ListOptions{Kind: "BlockList"})
	for _, u := range lists.Items {
		var bl v1alpha1.BlockList
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &bl)
		in.Lists = append(in.Lists, policy.List{Object: &bl})
	}
	pols, _ := a.st.List(ctx, store.ListOptions{Kind: "Policy"})
	for _, u := range pols.Items {
		var p v1alpha1.Policy
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p)
		in.Policies = append(in.Policies, p)
	}
	return in
}

func (a storeAudiences) ListAudiences(ctx context.Context, ns string) ([]ListAudience, error) {
	var out []ListAudience
	for _, x := range policy.Audience(a.input(ctx)) {
		out = append(out, ListAudience(x))
	}
	slices.SortFunc(out, func(x, y ListAudience) int {
		if x.List < y.List {
			return -1
		}
		return 1
	})
	return out, nil
}

func (a storeAudiences) AudienceNote(ctx context.Context, obj *unstructured.Unstructured) (string, bool, error) {
	in := a.input(ctx)
	if obj.GetKind() == "Policy" {
		var p v1alpha1.Policy
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p)
		in.Policies = append(in.Policies, p)
	}
	n, ok := policy.Note(in, obj.GetKind(), obj.GetNamespace(), obj.GetName())
	return n, ok, nil
}

// TestBlockListAudience: GET /blocklists/audience says to whom each list
// applies (viewer role), and the apply note of a policy about to be
// written counts the new policy.
func TestBlockListAudience(t *testing.T) {
	var e *testEnv
	e = newEnv(t, func(o *Options, d *Deps) {
		bindRoles(o)
		d.Policies = storeAudiences{d.Store}
	})
	adm := e.withToken(e.adminToken())
	view := roleToken(t, e, "view", auth.RoleViewer)
	list := func(name string, global *bool) map[string]any {
		spec := map[string]any{"sources": []any{map[string]any{"name": "s", "inline": []any{"||" + name + ".example^"}}}}
		if global != nil {
			spec["global"] = *global
		}
		return map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "BlockList", "metadata": map[string]any{"namespace": "default", "name": name}, "spec": spec}
	}
	f := false
	kids := map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "Policy", "metadata": map[string]any{"namespace": "default", "name": "kids"},
		"spec": map[string]any{"clientGroupRefs": []any{"kids"}, "blockListRefs": []any{"games"}, "excludeListRefs": []any{"ui-allow"}}}
	for _, o := range []map[string]any{list("ads", nil), list("ui-allow", nil), list("games", &f), kids} {
		if r := adm.do("POST", "/apply", o); r.code != 200 {
			t.Fatalf("apply: %d %s", r.code, r.body)
		}
	}
	r := view.do("GET", "/blocklists/audience", nil)
	var body ListBody[ListAudience]
	if err := json.Unmarshal(r.body, &body); err != nil || r.code != 200 {
		t.Fatalf("audience: %d %s", r.code, r.body)
	}
	got := map[string]string{}
	for _, a := range body.Items {
		got[a.List] = a.AppliesTo
	}
	want := map[string]string{"default/ads": "everyone", "default/ui-allow": "everyone except policies kids", "default/games": "policies kids"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s applies to %q, want %q (%s)", k, got[k], w, r.body)
		}
	}
	strict := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "Policy",
		"metadata": map[string]any{"namespace": "default", "name": "strict"}, "spec": map[string]any{"globalLists": false}}}
	if n := e.srv.audienceNotes(context.Background(), strict); len(n) != 1 || n[0] != "policy/strict gets no lists; opted out of ads, ui-allow" {
		t.Errorf("note of a policy about to be written: %q", n)
	}
	if n := e.srv.audienceNotes(context.Background(), &unstructured.Unstructured{Object: map[string]any{"kind": "DNSZone"}}); n != nil {
		t.Errorf("note for a zone: %q", n)
	}
}
