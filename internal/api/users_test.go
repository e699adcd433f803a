package api

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/auth/audit"
)

// internalTokenForTest is the listeners.internal token of test servers
// that accept it.
const internalTokenForTest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func userGroups(t *testing.T, r resp) []string {
	t.Helper()
	var out []string
	for _, g := range r.json(t)["groups"].([]any) {
		out = append(out, g.(string))
	}
	return out
}

// TestUserLifecycle: an administrator creates, reads, changes, disables,
// enables and deletes a local user through the API, and the user sees each
// step: login, mustChangePassword, groups giving grants, sessions and tokens
// refused at once when disabled, and tokens gone with the user.
func TestUserLifecycle(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) {
		o.RBACBindings = append(o.RBACBindings, auth.Binding{Name: "ops", Subject: auth.Subject{Kind: "Group", Name: "ops"}, Role: auth.RoleOperator, Scope: auth.ClusterScope})
	})
	admin := e.withToken(e.adminToken())

	// Generated password, shown once; mustChangePassword set.
	r := admin.do("POST", "/iam/users", map[string]any{"name": "alice", "displayName": "Alice A.", "groups": []string{"ops"}})
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	body := r.json(t)
	pw, _ := body["password"].(string)
	u := body["user"].(map[string]any)
	if len(pw) < 16 || u["mustChangePassword"] != true || u["displayName"] != "Alice A." || u["disabled"] != false {
		t.Fatalf("created: %s", r.body)
	}
	if strings.Contains(string(admin.do("GET", "/iam/users/alice", nil).body), pw) {
		t.Fatal("the generated password is shown again")
	}
	if r := admin.do("POST", "/iam/users", map[string]any{"name": "alice", "password": "another-password"}); r.code != 409 || r.errKey(t) != KeyConflict {
		t.Fatalf("duplicate: %d %s", r.code, r.body)
	}
	for name, b := range map[string]map[string]any{
		"bad name":            {"name": "a b"},
		"short password":      {"name": "x1", "password": "short"},
		"generated, no force": {"name": "x2", "mustChangePassword": false},
		"group with a space":  {"name": "x3", "groups": []string{"a b"}},
		"duplicate group":     {"name": "x4", "groups": []string{"g", "g"}},
	} {
		if r := admin.do("POST", "/iam/users", b); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Errorf("%s: %d %s", name, r.code, r.body)
		}
	}

	// The new user must change the generated password before anything else.
	c := e.login("alice", pw)
	if r := c.do("GET", "/objects/dnszones", nil); r.code != 403 || r.errKey(t) != KeyPasswordChangeRequired {
		t.Fatalf("before the change: %d %s", r.code, r.body)
	}
	r = c.do("POST", "/auth/password", map[string]any{"currentPassword": pw, "newPassword": "alice-password"})
	if r.code != 200 {
		t.Fatalf("password change: %d %s", r.code, r.body)
	}
	c.csrf = r.json(t)["csrf"].(string)
	if r := c.do("POST", "/cache/flush", map[string]any{}); r.code == 401 || r.code == 403 {
		t.Fatalf("operator through group ops: %d %s", r.code, r.body)
	}
	// A supplied password with mustChangePassword false logs in straight away.
	if r := admin.do("POST", "/iam/users", map[string]any{"name": "bob", "password": "bob-password", "mustChangePassword": false}); r.code != 201 || r.json(t)["password"] != nil {
		t.Fatalf("create bob: %d %s", r.code, r.body)
	}
	if r := e.login("bob", "bob-password").do("GET", "/objects/dnszones", nil); r.code != 403 || r.errKey(t) != KeyForbidden {
		t.Fatalf("bob without grants: %d %s", r.code, r.body)
	}

	// Names are what people type: dots, @ and capitals are fine.
	if r := admin.do("POST", "/iam/users", map[string]any{"name": "Bob.Smith@corp.example", "password": "bob-smith-password"}); r.code != 201 {
		t.Fatalf("create a mail-like name: %d %s", r.code, r.body)
	}
	if r := admin.do("GET", "/iam/users/Bob.Smith@corp.example", nil); r.code != 200 || r.json(t)["name"] != "Bob.Smith@corp.example" {
		t.Fatalf("get a mail-like name: %d %s", r.code, r.body)
	}

	// Groups are live: removing ops takes operator away on the next request.
	r = admin.do("PATCH", "/iam/users/alice", map[string]any{"groups": []string{}})
	if r.code != 200 || len(userGroups(t, r)) != 0 || r.json(t)["displayName"] != "Alice A." {
		t.Fatalf("patch groups: %d %s", r.code, r.body)
	}
	if r := c.do("POST", "/cache/flush", map[string]any{}); r.code != 403 {
		t.Fatalf("after groups removed: %d %s", r.code, r.body)
	}
	r = admin.do("PATCH", "/iam/users/alice", map[string]any{"displayName": "Alice", "groups": []string{"ops", "dev"}})
	if r.code != 200 || !slices.Equal(userGroups(t, r), []string{"ops", "dev"}) || r.json(t)["displayName"] != "Alice" {
		t.Fatalf("patch both: %d %s", r.code, r.body)
	}
	if r := admin.do("PATCH", "/iam/users/nobody", map[string]any{"displayName": "x"}); r.code != 404 || r.errKey(t) != KeyNotFound {
		t.Fatalf("patch unknown: %d %s", r.code, r.body)
	}

	// Disable: session and token refused at once, login says account_disabled.
	tok := c.do("POST", "/auth/tokens", map[string]any{"description": "alice's"}).json(t)["token"].(string)
	at := e.withToken(tok)
	if r := at.do("GET", "/auth/me", nil); r.code != 200 {
		t.Fatalf("alice token: %d", r.code)
	}
	r = admin.do("POST", "/iam/users/alice/disable", nil)
	if r.code != 200 || r.json(t)["disabled"] != true {
		t.Fatalf("disable: %d %s", r.code, r.body)
	}
	for name, cl := range map[string]*client{"session": c, "token": at} {
		if r := cl.do("GET", "/auth/me", nil); r.code != 401 {
			t.Errorf("%s of a disabled user: %d %s", name, r.code, r.body)
		}
	}
	if r := e.anon().do("POST", "/auth/login", map[string]string{"username": "alice", "password": "alice-password"}); r.code != 403 || r.errKey(t) != KeyAccountDisabled {
		t.Fatalf("disabled login: %d %s", r.code, r.body)
	}
	// Enable: the token works again, the old session stays revoked.
	e.clock.add(2 * time.Second)
	if r := admin.do("POST", "/iam/users/alice/enable", nil); r.code != 200 || r.json(t)["disabled"] != false {
		t.Fatalf("enable: %d %s", r.code, r.body)
	}
	if r := at.do("GET", "/auth/me", nil); r.code != 200 {
		t.Errorf("token after enable: %d", r.code)
	}
	if r := c.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("session from before the disable: %d", r.code)
	}

	// Reset by an administrator: generated, must change, sessions and (asked) tokens revoked.
	c = e.login("alice", "alice-password")
	r = admin.do("POST", "/iam/users/alice/reset-password", map[string]any{"revokeTokens": true})
	if r.code != 200 || r.json(t)["tokensRevoked"] != float64(1) || r.json(t)["password"] == nil {
		t.Fatalf("reset: %d %s", r.code, r.body)
	}
	if r := at.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("token after reset with revokeTokens: %d", r.code)
	}
	if r := c.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("session after reset: %d", r.code)
	}
	pw = r.json(t)["password"].(string)
	if r := e.login("alice", pw).do("GET", "/auth/me", nil); r.json(t)["mustChangePassword"] != true {
		t.Errorf("reset does not set mustChangePassword: %s", r.body)
	}

	// Delete: the user and its tokens go; a user created again under the
	// name inherits neither tokens nor sessions.
	e.clock.add(2 * time.Second)
	r = admin.do("POST", "/iam/users/alice/reset-password", map[string]any{"password": "alice-password-2"})
	if r.code != 200 || r.json(t)["password"] != nil {
		t.Fatalf("reset with a password: %d %s", r.code, r.body)
	}
	c = e.login("alice", "alice-password-2")
	r = c.do("POST", "/auth/password", map[string]any{"currentPassword": "alice-password-2", "newPassword": "alice-password-3"})
	if r.code != 200 {
		t.Fatalf("change: %d %s", r.code, r.body)
	}
	c.csrf = r.json(t)["csrf"].(string)
	tok = c.do("POST", "/auth/tokens", map[string]any{}).json(t)["token"].(string)
	if r := admin.do("DELETE", "/iam/users/alice", nil); r.code != 204 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if r := admin.do("GET", "/iam/users/alice", nil); r.code != 404 {
		t.Fatalf("get deleted: %d", r.code)
	}
	if r := admin.do("POST", "/iam/users", map[string]any{"name": "alice", "password": "new-alice-password", "groups": []string{"ops"}}); r.code != 201 {
		t.Fatalf("re-create: %d %s", r.code, r.body)
	}
	if r := e.withToken(tok).do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("old token after re-creation: %d", r.code)
	}
	if r := c.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("old session after re-creation: %d", r.code)
	}

	// Every write is in the audit trail with its result.
	page, err := e.srv.audit.List(context.Background(), audit.Query{Kind: auth.KindLocalUser, Name: "alice", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range page.Items {
		if ev.Action != "login" && ev.Action != "change-password" {
			got = append(got, ev.Action+"="+ev.Result)
		}
	}
	for _, want := range []string{"create-user=created", "update-user=updated", "disable-user=disabled", "enable-user=enabled",
		"reset-password=reset, tokens revoked", "reset-password=reset", "delete-user=deleted"} {
		if !slices.Contains(got, want) {
			t.Errorf("audit trail lacks %s: %v", want, got)
		}
	}
}

// TestLastAdminProtected: the last enabled administrator cannot be
// disabled, deleted or lose the group that makes it one; with a second
// administrator it can.
func TestLastAdminProtected(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) {
		o.RBACBindings = append(o.RBACBindings, auth.Binding{Name: "admins", Subject: auth.Subject{Kind: "Group", Name: "admins"}, Role: auth.RoleAdmin, Scope: auth.ClusterScope})
	})
	admin := e.withToken(e.adminToken())
	lastAdmin := func(r resp, what string) {
		t.Helper()
		if r.code != 409 || r.errKey(t) != KeyConflict || !strings.Contains(string(r.body), "last enabled administrator") {
			t.Errorf("%s: want 409 naming the last administrator, got %d %s", what, r.code, r.body)
		}
	}
	lastAdmin(admin.do("POST", "/iam/users/admin/disable", nil), "disable admin")
	lastAdmin(admin.do("DELETE", "/iam/users/admin", nil), "delete admin")

	// carol is an administrator through group admins; a disabled one does not count.
	if r := admin.do("POST", "/iam/users", map[string]any{"name": "carol", "password": "carol-password", "groups": []string{"admins"}, "mustChangePassword": false}); r.code != 201 {
		t.Fatalf("create carol: %d %s", r.code, r.body)
	}
	if r := admin.do("POST", "/iam/users/carol/disable", nil); r.code != 200 {
		t.Fatalf("disable carol: %d %s", r.code, r.body)
	}
	lastAdmin(admin.do("POST", "/iam/users/admin/disable", nil), "disable admin while carol is disabled")
	if r := admin.do("POST", "/iam/users/carol/enable", nil); r.code != 200 {
		t.Fatalf("enable carol: %d %s", r.code, r.body)
	}
	if r := admin.do("POST", "/iam/users/admin/disable", nil); r.code != 200 {
		t.Fatalf("disable admin with carol enabled: %d %s", r.code, r.body)
	}
	// Now carol is the last one: her group cannot go, nor can she.
	cc := e.withToken(e.tokenFor("carol", "carol-password"))
	lastAdmin(cc.do("PATCH", "/iam/users/carol", map[string]any{"groups": []string{"dev"}}), "drop carol's admin group")
	lastAdmin(cc.do("DELETE", "/iam/users/carol", nil), "delete carol")
	if r := cc.do("PATCH", "/iam/users/carol", map[string]any{"displayName": "Carol"}); r.code != 200 {
		t.Errorf("other changes to the last admin: %d %s", r.code, r.body)
	}
	if r := cc.do("POST", "/iam/users/admin/enable", nil); r.code != 200 {
		t.Fatalf("enable admin: %d %s", r.code, r.body)
	}
	if r := cc.do("DELETE", "/iam/users/carol", nil); r.code != 204 {
		t.Errorf("delete carol with admin enabled: %d %s", r.code, r.body)
	}
}

// tokenFor logs in as user and returns an unscoped token of it.
func (e *testEnv) tokenFor(user, pw string) string {
	e.t.Helper()
	r := e.login(user, pw).do("POST", "/auth/tokens", map[string]any{})
	if r.code != 201 {
		e.t.Fatalf("token of %s: %d %s", user, r.code, r.body)
	}
	return r.json(e.t)["token"].(string)
}
