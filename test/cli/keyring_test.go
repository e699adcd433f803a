package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var tokenRE = regexp.MustCompile(`svc_[a-z0-9]{12}_[A-Za-z0-9_-]{43}`)

// configToken checks the mode of u's client config and returns the token
// stored in it.
func configToken(t *testing.T, u *user) string {
	t.Helper()
	p := filepath.Join(u.home, ".config", "service", "config.yaml")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("client config mode %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(p)
	return tokenRE.FindString(string(raw))
}

func TestTokenInConfigFileWithKeyringFile(t *testing.T) {
	s := startServer(t)
	u := newUser(t) // SERVICE_KEYRING=file
	r := u.runIn(adminPassword+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin", "--name", "lab")
	if r.Code != 0 {
		t.Fatalf("login: %d %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "token stored in the config file") || strings.Contains(r.Stderr, "keyring") {
		t.Errorf("login: %q %q", r.Stdout, r.Stderr)
	}
	if configToken(t, u) == "" {
		t.Fatal("no token in the client config")
	}
	u.ok("get", "zones")
	u.ok("logout")
	if tok := configToken(t, u); tok != "" {
		t.Errorf("token left in the config after logout")
	}
}

func TestLoginFallsBackWithoutKeyring(t *testing.T) {
	s := startServer(t)
	u := newUser(t)
	// No SERVICE_KEYRING, and a session bus that does not exist: the
	// keyring fails and the token goes to the config file.
	var env []string
	for _, e := range u.env {
		if !strings.HasPrefix(e, "SERVICE_KEYRING=") {
			env = append(env, e)
		}
	}
	u.env = append(env, "DBUS_SESSION_BUS_ADDRESS=unix:path="+filepath.Join(u.home, "no-such-bus"))
	r := u.runIn(adminPassword+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin", "--name", "lab")
	if r.Code != 0 {
		t.Fatalf("login without a keyring: %d %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "token stored in the config file") {
		t.Errorf("login: %s", r.Stdout)
	}
	if n := strings.Count(r.Stderr, "OS keyring unavailable"); n != 1 {
		t.Errorf("keyring warning %d times: %s", n, r.Stderr)
	}
	if configToken(t, u) == "" {
		t.Fatal("no token in the client config")
	}
	// The stored token works; reading it from the file needs no keyring.
	r = u.run("get", "zones")
	if r.Code != 0 || strings.Contains(r.Stderr, "keyring") {
		t.Errorf("get zones: %d %s", r.Code, r.Stderr)
	}
	r = u.run("logout")
	if r.Code != 0 || strings.Count(r.Stderr, "OS keyring unavailable") > 1 {
		t.Errorf("logout: %d %s", r.Code, r.Stderr)
	}
	if tok := configToken(t, u); tok != "" {
		t.Errorf("token left in the config after logout")
	}
}
