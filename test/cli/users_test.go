package cli_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestUsersCommands: an administrator manages a local user with svc users
// and the user sees each step with its own svc: the generated password
// (changed at first login), groups, disable (its token refused at once),
// enable, password reset with token revocation, delete; the last
// administrator is protected.
func TestUsersCommands(t *testing.T) {
	s := startServer(t)
	admin := loggedIn(t, s)

	out := admin.ok("users", "create", "alice", "--group", "ops,dev", "--display-name", "Alice Doe")
	m := regexp.MustCompile(`(?m)^generated password: (\S+)$`).FindStringSubmatch(out)
	if !strings.Contains(out, "user alice created") || m == nil {
		t.Fatalf("create: %s", out)
	}
	pw := m[1]
	list := admin.ok("users", "list")
	if !strings.HasPrefix(list, "NAME") || !regexp.MustCompile(`(?m)^alice\s+enabled\s+-\s+ops,dev\s+true\s+-\s*$`).MatchString(list) ||
		!regexp.MustCompile(`(?m)^admin\s+enabled\s+builtin\s`).MatchString(list) {
		t.Fatalf("list:\n%s", list)
	}
	if strings.Contains(list, pw) {
		t.Fatal("the generated password is listed")
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(admin.ok("users", "get", "alice", "-o", "json")), &got); err != nil || got["displayName"] != "Alice Doe" {
		t.Fatalf("get -o json: %v %v", got, err)
	}
	if r := admin.run("users", "create", "alice"); r.Code == 0 || !strings.Contains(r.Stderr, "conflict") {
		t.Errorf("duplicate: %d %s", r.Code, r.Stderr)
	}

	// alice logs in with the generated password, which svc login makes her change.
	alice := newUser(t)
	alice.okIn(pw+"\nalice-new-password\n", "login", "--server", s.URL, "-u", "alice", "--password-stdin", "--new-password-stdin", "--name", "a")
	if me := alice.ok("api", "/auth/me"); !strings.Contains(me, `"mustChangePassword": false`) && !strings.Contains(me, `"mustChangePassword":false`) {
		t.Fatalf("alice after first login: %s", me)
	}

	out = admin.ok("users", "set", "alice", "--remove-group", "dev", "--add-group", "admins-not")
	if !strings.Contains(out, "groups: ops,admins-not") {
		t.Errorf("set groups: %s", out)
	}
	if out := admin.ok("users", "set", "alice", "--groups", ""); !strings.Contains(out, "groups: none") {
		t.Errorf("clear groups: %s", out)
	}

	// Disable: alice's CLI token is refused at once; enable brings it back.
	if out := admin.ok("users", "disable", "alice"); out != "user alice disabled\n" {
		t.Errorf("disable: %q", out)
	}
	if r := alice.run("api", "/auth/me"); r.Code == 0 || !strings.Contains(r.Stderr, "unauthenticated") {
		t.Errorf("disabled user's token: %d %s", r.Code, r.Stderr)
	}
	if !regexp.MustCompile(`(?m)^alice\s+disabled\s`).MatchString(admin.ok("users", "list")) {
		t.Error("list does not show alice disabled")
	}
	admin.ok("users", "enable", "alice")
	alice.ok("api", "/auth/me")

	// Reset with --revoke-tokens: a new generated password, alice's token gone.
	out = admin.ok("users", "set", "alice", "--reset-password", "--revoke-tokens")
	if !strings.Contains(out, "password of alice reset") || !strings.Contains(out, "generated password: ") || !strings.Contains(out, "1 API token(s) revoked") {
		t.Errorf("reset: %s", out)
	}
	if r := alice.run("api", "/auth/me"); r.Code == 0 {
		t.Error("alice's token survives --revoke-tokens")
	}

	// The built-in admin is the last administrator: it cannot be disabled or deleted.
	for _, verb := range []string{"disable", "delete"} {
		r := admin.run("users", verb, "admin")
		if r.Code == 0 || !strings.Contains(r.Stderr, "last enabled administrator") || !strings.Contains(r.Stderr, "hint: ") {
			t.Errorf("%s admin: %d %s", verb, r.Code, r.Stderr)
		}
	}
	if out := admin.ok("users", "delete", "alice"); out != "user alice deleted\n" {
		t.Errorf("delete: %q", out)
	}
	if r := admin.run("users", "get", "alice"); r.Code == 0 || !strings.Contains(r.Stderr, "not_found") {
		t.Errorf("get deleted: %d %s", r.Code, r.Stderr)
	}
	admin.ok("users", "delete", "alice", "--ignore-not-found")
	if r := admin.run("users", "set", "alice"); r.Code == 0 || !strings.Contains(r.Stderr, "nothing to change") {
		t.Errorf("set without flags: %d %s", r.Code, r.Stderr)
	}
}
