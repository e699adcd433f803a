package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeRunConfigAPITrustsDevCA runs the dev config of `make run`
// (hack/dev/service.yaml, its objects and hack/devcert's certificate) with
// the listeners moved to port 0, and follows the README's first steps with
// the CLI: the API's certificate verifies with --ca-file .run/tls/ca.pem
// (it was a self-signed one that only --insecure-skip-tls-verify accepted),
// and the first login changes the generated password.
func TestMakeRunConfigAPITrustsDevCA(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	devcert := filepath.Join(work, "devcert")
	if out, err := exec.Command("go", "build", "-o", devcert, "github.com/svcdns/svc/hack/devcert").CombinedOutput(); err != nil {
		t.Fatalf("building hack/devcert: %v\n%s", err, out)
	}
	// The checkout as make run sees it: hack/dev and .run/tls.
	if out, err := exec.Command("cp", "-r", filepath.Join(repo, "hack"), filepath.Join(work, "hack")).CombinedOutput(); err != nil {
		t.Fatalf("copying hack/: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(work, ".run"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(devcert, ".run/tls")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("devcert: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(work, "hack", "dev", "service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// No fixed ports in tests: every loopback address gets port 0; the
	// upstreams stay (nothing here resolves through them).
	cfg := regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(string(raw), "127.0.0.1:0")
	// A short lameduck so the test's SIGTERM stops the node at once.
	cfg = strings.Replace(cfg, "\nnode:\n", "\nnode:\n  lameduck: 50ms\n", 1)
	if err := os.WriteFile(filepath.Join(work, "service.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startBinaryServerIn(t, work, "service.yaml", "https")

	u := newUser(t)
	const newPw = "the dev admin passphrase"
	ca := filepath.Join(work, ".run", "tls", "ca.pem")
	out := u.okIn(s.Password+"\n"+newPw+"\n", "--ca-file", ca, "login", "--server", s.URL, "-u", "admin",
		"--password-stdin", "--new-password-stdin")
	if !strings.Contains(out, "logged in") {
		t.Errorf("login: %q", out)
	}
	// The context keeps the CA: later verbs verify without flags.
	if out := u.ok("get", "zones"); !strings.Contains(out, "home.lan") {
		t.Errorf("get zones (the dev objects):\n%s", out)
	}
	// Without the CA the certificate is not trusted: the check is real.
	stranger := newUser(t)
	if r := stranger.runIn(newPw+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin"); r.Code == 0 ||
		!strings.Contains(r.Stderr, "certificate") {
		t.Errorf("login without --ca-file: exit %d, want a certificate error\n%s", r.Code, r.Stderr)
	}
}
