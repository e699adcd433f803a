package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestLoginContextsAndErrors(t *testing.T) {
	s := startServer(t)
	u := newUser(t)

	// Without a server or a login the CLI says how to log in.
	r := u.run("get", "zones")
	if r.Code == 0 || !strings.Contains(r.Stderr, "svc login") {
		t.Errorf("no server: %d %q", r.Code, r.Stderr)
	}
	// A 401 prints the server's message and how to log in.
	r = u.run("get", "zones", "--server", s.URL)
	if r.Code == 0 || !strings.Contains(r.Stderr, "authentication required") || !strings.Contains(r.Stderr, "hint: log in or send a valid API token") ||
		!strings.Contains(r.Stderr, "svc login --server "+s.URL) {
		t.Errorf("401: %d %q", r.Code, r.Stderr)
	}
	// A wrong password is refused with the server's message.
	r = u.runIn("wrong password\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin")
	if r.Code == 0 || !strings.Contains(r.Stderr, "unauthenticated") {
		t.Errorf("wrong password: %d %q", r.Code, r.Stderr)
	}

	out := u.okIn(adminPassword+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin", "--name", "lab", "--default-namespace", "other")
	if !strings.Contains(out, `context "lab"`) {
		t.Errorf("login: %s", out)
	}
	cfgPath := filepath.Join(u.home, ".config", "service", "config.yaml")
	st, err := os.Stat(cfgPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client config: %v %v", err, st)
	}
	raw, _ := os.ReadFile(cfgPath)
	tok := regexp.MustCompile(`svc_[a-z0-9]{12}_[A-Za-z0-9_-]{43}`).FindString(string(raw))
	if tok == "" {
		t.Fatalf("no token in the client config:\n%s", raw)
	}
	if show := u.ok("config", "show"); strings.Contains(show, tok) || !strings.Contains(show, "REDACTED") {
		t.Errorf("config show leaks the token:\n%s", show)
	}
	if got := u.ok("config", "current-context"); got != "lab\n" {
		t.Errorf("current-context %q", got)
	}
	// The token was created with the default name service-cli@<hostname>.
	host, _ := os.Hostname()
	if toks := u.ok("api", "/auth/tokens"); !strings.Contains(toks, "service-cli@"+host) {
		t.Errorf("token description: %s", toks)
	}
	// The context's default namespace applies.
	u.okIn(`{"apiVersion":"service.io/v1alpha1","kind":"ClientGroup","metadata":{"name":"g1"},"spec":{}}`, "apply", "-f", "-", "-n", "other")
	u.ok("get", "cg", "g1")

	// Token login, verified with GET /auth/me, into a second context.
	u2 := newUser(t)
	out = u2.okIn(tok+"\n", "login", "--server", s.URL, "--token-stdin", "--name", "viatoken")
	if !strings.Contains(out, "as admin") {
		t.Errorf("token login: %s", out)
	}
	r = u2.runIn("svc_aaaaaaaaaaaa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n", "login", "--server", s.URL, "--token-stdin", "--name", "bad")
	if r.Code == 0 || !strings.Contains(r.Stderr, "verifying the token") {
		t.Errorf("bad token login: %d %s", r.Code, r.Stderr)
	}
	u2.ok("config", "set-context", "spare", "--server", "https://192.0.2.1:8080", "--default-namespace", "x")
	ctxs := u2.ok("config", "get-contexts")
	if !strings.Contains(ctxs, "*         viatoken") || !strings.Contains(ctxs, "spare") {
		t.Errorf("get-contexts:\n%s", ctxs)
	}
	u2.ok("config", "use-context", "spare")
	u2.ok("config", "use-context", "viatoken")
	u2.ok("config", "delete-context", "spare")
	if schema := u2.ok("config", "schema"); !strings.Contains(schema, `"currentContext"`) {
		t.Errorf("schema: %s", schema)
	}

	// Server errors: message and hint, non-zero exit.
	r = u.runIn(`{"apiVersion":"service.io/v1alpha1","kind":"DNSRecordSet","metadata":{"name":"bad"},"spec":{"zoneRef":{"name":"x"},"endpoints":[{"dnsName":"a","recordType":"lower","targets":["1.2.3.4"]}]}}`, "apply", "-f", "-")
	if r.Code == 0 || !strings.Contains(r.Stderr, "error: ") || !strings.Contains(r.Stderr, "recordType") {
		t.Errorf("invalid apply: %d %q", r.Code, r.Stderr)
	}
	r = u.run("get", "zone", "nope")
	if r.Code == 0 || !strings.Contains(r.Stderr, "not found") {
		t.Errorf("get missing: %d %q", r.Code, r.Stderr)
	}
	r = u.run("get", "nokind")
	if r.Code == 0 || !strings.Contains(r.Stderr, `unknown kind "nokind"`) {
		t.Errorf("unknown kind: %d %q", r.Code, r.Stderr)
	}
	r = u.run("delete", "zone", "root")
	if r.Code == 0 || !strings.Contains(r.Stderr, "error: ") {
		t.Errorf("deleting the root zone: %d %q", r.Code, r.Stderr)
	}

	// api verb: raw requests, bodies inline or from stdin.
	if me := u.ok("api", "GET", "/auth/me"); !strings.Contains(me, `"name": "admin"`) {
		t.Errorf("api /auth/me: %s", me)
	}
	r = u.run("api", "/no/such/route")
	if r.Code == 0 || !strings.Contains(r.Stderr, "no route") {
		t.Errorf("api 404: %d %q", r.Code, r.Stderr)
	}

	// logout revokes the token and forgets it.
	u.ok("logout")
	r = u.run("get", "zones")
	if r.Code == 0 || !strings.Contains(r.Stderr, "svc login") {
		t.Errorf("after logout: %d %q", r.Code, r.Stderr)
	}
	r = u2.run("get", "zones") // the revoked token was shared with u2
	if r.Code == 0 || !strings.Contains(r.Stderr, "unauthenticated") {
		t.Errorf("revoked token: %d %q", r.Code, r.Stderr)
	}
	u.ok("logout", "lab", "--remove")
	if got := u.ok("config", "get-contexts"); strings.Contains(got, "lab") {
		t.Errorf("context kept after --remove: %s", got)
	}
}

func TestTokenGenerate(t *testing.T) {
	u := newUser(t)
	re := regexp.MustCompile(`^svc_[a-z0-9]{12}_[A-Za-z0-9_-]{43}\n$`)
	a, b := u.ok("token", "generate"), u.ok("token", "generate")
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Fatalf("token generate: %q %q", a, b)
	}
	f := filepath.Join(t.TempDir(), "tok")
	u.ok("token", "generate", "--out", f)
	st, err := os.Stat(f)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("--out file: %v %v", err, st)
	}
	if r := u.run("token", "generate", "--out", f); r.Code == 0 {
		t.Errorf("--out overwrote an existing file")
	}
}
