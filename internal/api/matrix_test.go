package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/auth"
)

// caller is one row of the permission matrix.
type caller struct {
	name   string
	c      *client
	grants []auth.Grant // nil with anon: anonymous
	anon   bool
	scoped bool // a token with scopes: self.write is not kept
}

// expectAllowed decides from the role tables alone (not the authorizer)
// whether grants admit a route, so that the two are checked against each
// other. A token with scopes keeps only self.read and tokens.own of the
// implicit grants.
func expectAllowed(r *routeInfo, grants []auth.Grant, scoped bool) bool {
	if r.Public {
		return true
	}
	if auth.IsImplicit(r.Permission) {
		return !scoped || r.Permission != "self.write"
	}
	for _, g := range grants {
		if !slices.Contains(auth.RolePermissions(g.Role), r.Permission) {
			continue
		}
		if g.Scope.Kind == "cluster" {
			return true
		}
		if !auth.ZoneScopable(r.Permission) {
			continue
		}
		switch {
		case r.Scope == "any":
			return true
		case strings.HasPrefix(r.Scope, "zone:") && g.Scope.Name == "example":
			return true
		}
	}
	return false
}

func fillPath(p string) string {
	return strings.NewReplacer("{zone}", "example", "{name}", "example", "{namespace}", "default", "{id}", "abcdefghijkl", "{ns}", "default", "{source}", "main", "{file}", "example.svg").Replace(p)
}

func bodyFor(r *routeInfo) any {
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodDelete:
		return nil
	case strings.HasPrefix(r.Path, "/objects/dnsrecordsets/") && r.Method == http.MethodPut:
		return map[string]any{"spec": map[string]any{"zoneRef": map[string]any{"name": "example"}, "endpoints": []any{}}}
	case strings.HasPrefix(r.Path, "/objects/dnszones/") && r.Method == http.MethodPut:
		return map[string]any{"spec": map[string]any{"zoneName": "example.com"}}
	}
	return map[string]any{}
}

// TestPermissionMatrix calls every registered route as each role, anonymous,
// a scoped token and a zone-scoped binding; a route whose permission is
// missing or wrong cannot pass.
func TestPermissionMatrix(t *testing.T) {
	roles := auth.Roles()
	e := newEnv(t, func(o *Options, _ *Deps) {
		o.InternalToken = internalTokenForTest
		for _, r := range roles {
			o.RBACBindings = append(o.RBACBindings, auth.Binding{Name: "b-" + r, Subject: auth.Subject{Kind: "Group", Name: "g-" + r}, Role: r, Scope: auth.ClusterScope})
		}
		o.RBACBindings = append(o.RBACBindings, auth.Binding{Name: "zoned", Subject: auth.Subject{Kind: "User", Name: "zoned"}, Role: auth.RoleZoneAdmin, Scope: auth.ZoneScope("example")})
	})
	tokenOf := func(c *client, scopes ...string) string {
		r := c.do("POST", "/auth/tokens", map[string]any{"scopes": scopes})
		if r.code != 201 {
			t.Fatalf("token: %d %s", r.code, r.body)
		}
		e.clock.add(2 * time.Minute) // keep clear of the login rate limit
		return r.json(t)["token"].(string)
	}
	var callers []caller
	for _, r := range roles {
		e.addUser("u-"+r, "password-"+r, "g-"+r)
		callers = append(callers, caller{name: r, c: e.withToken(tokenOf(e.login("u-"+r, "password-"+r))), grants: []auth.Grant{{Role: r, Scope: auth.ClusterScope}}})
	}
	e.addUser("zoned", "password-zoned")
	callers = append(callers,
		caller{name: "anonymous", c: e.anon(), anon: true},
		caller{name: "admin-token-scoped-viewer", c: e.withToken(tokenOf(e.login("admin", adminPW), "viewer")), grants: []auth.Grant{{Role: auth.RoleViewer, Scope: auth.ClusterScope}}, scoped: true},
		caller{name: "internal-token", c: e.withToken(internalTokenForTest), grants: []auth.Grant{{Role: auth.RoleViewer, Scope: auth.ClusterScope}, {Role: auth.RoleAuditor, Scope: auth.ClusterScope}}},
		caller{name: "zone-admin@zone:example", c: e.withToken(tokenOf(e.login("zoned", "password-zoned"))), grants: []auth.Grant{{Role: auth.RoleZoneAdmin, Scope: auth.ZoneScope("example")}}},
	)
	for _, k := range callers {
		for _, r := range e.srv.routes {
			name := fmt.Sprintf("%s %s %s", k.name, r.Method, r.Path)
			e.clock.add(3 * time.Second)
			res := k.c.do(r.Method, fillPath(r.Path), bodyFor(r))
			if res.code >= 500 && res.code != http.StatusNotImplemented {
				t.Errorf("%s: %d %s", name, res.code, res.body)
				continue
			}
			switch {
			case k.anon && !r.Public:
				if res.code != 401 || res.errKey(t) != KeyUnauthenticated {
					t.Errorf("%s: want 401, got %d %s", name, res.code, res.body)
				}
			case k.anon || expectAllowed(r, k.grants, k.scoped):
				if res.code == 401 || (res.code == 403 && res.errKey(t) == KeyForbidden) {
					t.Errorf("%s: want allowed, got %d %s", name, res.code, res.body)
				}
			default:
				if res.code != 403 || res.errKey(t) != KeyForbidden {
					t.Errorf("%s: want 403 forbidden, got %d %s", name, res.code, res.body)
					continue
				}
				if m, _ := res.json(t)["error"].(map[string]any)["missing"].(string); m != r.Permission {
					t.Errorf("%s: missing %q, want %q", name, m, r.Permission)
				}
			}
		}
	}
}
