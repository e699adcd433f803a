package auth

import (
	"context"
	"slices"
	"testing"
)

// TestFrozenGrants: an OIDC-login principal keeps a frozen grant only while
// a binding that gave it at login is unchanged.
func TestFrozenGrants(t *testing.T) {
	viewers := Binding{Name: "v", Source: "object", Subject: Subject{Kind: "Group", Name: "corp:dev"}, Role: RoleViewer, Scope: ClusterScope, Revision: "uid-1@1"}
	ops := Binding{Name: "o", Source: "config", Subject: Subject{Kind: "User", Name: "corp:alice"}, Role: RoleOperator, Scope: ClusterScope}
	live := []Binding{viewers, ops}
	a := NewAuthorizer(func(context.Context) ([]Binding, []string, error) { return live, nil, nil })
	ctx := context.Background()
	grants, prints, err := a.Freeze(ctx, &Principal{Kind: "User", Name: "corp:alice", Groups: []string{"corp:dev"}})
	if err != nil || len(grants) != 2 || len(prints) != 2 {
		t.Fatalf("freeze: %v %v %v", grants, prints, err)
	}
	p := &Principal{Kind: "User", Name: "corp:alice", FrozenGrants: grants, FrozenBindings: prints}
	has := func(role string) bool {
		gs, err := a.Grants(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(gs, Grant{Role: role, Scope: ClusterScope})
	}
	if !has(RoleViewer) || !has(RoleOperator) {
		t.Fatal("frozen grants not honoured")
	}
	if !a.Authorize(ctx, p, "dnszones.read", ClusterScope).Allowed {
		t.Fatal("viewer permission refused")
	}
	// A new binding for the user gives nothing.
	live = append(live, Binding{Name: "a", Source: "config", Subject: Subject{Kind: "User", Name: "corp:alice"}, Role: RoleAdmin, Scope: ClusterScope})
	if has(RoleAdmin) {
		t.Fatal("a binding added after login was honoured")
	}
	// Re-created (new uid) or edited (new generation): the grant stops.
	for _, rev := range []string{"uid-2@1", "uid-1@2"} {
		changed := viewers
		changed.Revision = rev
		live = []Binding{changed, ops}
		if has(RoleViewer) {
			t.Fatalf("revision %s: grant still honoured", rev)
		}
	}
	live = []Binding{viewers}
	if has(RoleOperator) || !has(RoleViewer) {
		t.Fatal("removed binding still honoured, or unchanged one lost")
	}
	if fp := viewers.Fingerprint(); fp == ops.Fingerprint() || len(fp) != 16 {
		t.Fatalf("fingerprint %q", fp)
	}
}
