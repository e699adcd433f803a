package adminops_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// aliceBinding gives the restored user a role, so bindings travel too.
const aliceBinding = `apiVersion: service.io/v1alpha1
kind: RoleBinding
metadata: {name: alice-viewer}
spec:
  subject: {kind: User, name: alice}
  role: viewer
`

// TestBackupRestores: a default backup of node A (with objects a file
// manages, records, a deny entry, a setting, a user with a role binding)
// restores onto A itself (nothing fails, everything unchanged) and onto a
// fresh node B, which then answers the same DNS and lists the same
// objects, settings and users; without secrets the user must get a
// password on B (and the restore says how), with --include-secrets her
// password works on B.
func TestBackupRestores(t *testing.T) {
	sa := startServer(t, serverOpt{objects: map[string]string{"home-lan.yaml": homeLan}})
	a := newAdmin(t, sa)
	a.ok("records", "add", "home.lan", "printer", "A", "192.0.2.30")
	a.ok("lists", "deny", "ads.example.net")
	a.ok("settings", "set", "blocking.defaultResponse=nxdomain")
	run(t, sa.env(a.home), "alice password 1\n", "admin", "reset-password", "alice", "--create", "--password-stdin",
		"--socket", filepath.Join(sa.Dir, "data", "service.sock"))
	bindingFile := filepath.Join(t.TempDir(), "binding.yaml")
	if err := os.WriteFile(bindingFile, []byte(aliceBinding), 0o600); err != nil {
		t.Fatal(err)
	}
	a.ok("apply", "-f", bindingFile)
	// alice sets her own password at first login
	u := &admin{t: t, s: sa, home: t.TempDir()}
	login := run(t, []string{"HOME=" + u.home, "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file"},
		"alice password 1\nalice password 2\n", "login", "--server", sa.URL, "-u", "alice", "--password-stdin", "--new-password-stdin")
	if login.Code != 0 {
		t.Fatalf("alice's first login on A: %d\n%s%s", login.Code, login.Stdout, login.Stderr)
	}
	checkAnswers(t, "A", sa)

	file := filepath.Join(t.TempDir(), "backup.yaml")
	a.ok("backup", "--out", file)
	secretFile := filepath.Join(t.TempDir(), "backup-secrets.yaml")
	a.ok("backup", "--out", secretFile, "--include-secrets")
	body, _ := os.ReadFile(file)
	if strings.Contains(string(body), "passwordHash") {
		t.Errorf("a default backup holds password hashes")
	}
	if sb, _ := os.ReadFile(secretFile); !strings.Contains(string(sb), "passwordHash") {
		t.Errorf("a backup with --include-secrets holds no password hash")
	}

	// Onto the node it came from: no errors, nothing changes.
	r := a.run("restore", "-f", file)
	if r.Code != 0 {
		t.Fatalf("restore onto A: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if !strings.Contains(line, "unchanged") {
			t.Errorf("restore onto A changed something: %q\n%s", line, r.Stdout)
		}
	}

	// Onto a fresh node.
	sb := startServer(t, serverOpt{})
	b := newAdmin(t, sb)
	r = b.run("restore", "-f", file)
	if r.Code != 0 {
		t.Fatalf("restore onto fresh B: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("restore onto B:\n%s%s", r.Stdout, r.Stderr)
	if !strings.Contains(r.Stderr, "alice") || !strings.Contains(r.Stderr, "svc admin reset-password") {
		t.Errorf("restore without secrets does not say how alice gets a password:\n%s", r.Stderr)
	}
	checkAnswers(t, "B", sb)
	for _, kind := range []string{"dnszones", "dnsrecordsets", "blocklists", "rolebindings"} {
		if x, y := names(a.ok("get", kind, "-A", "-o", "name")), names(b.ok("get", kind, "-A", "-o", "name")); x != y {
			t.Errorf("%s: A has\n%s\nB has\n%s", kind, x, y)
		}
	}
	if x, y := a.ok("settings", "get", "blocking.defaultResponse"), b.ok("settings", "get", "blocking.defaultResponse"); x != y {
		t.Errorf("blocking.defaultResponse: A %q, B %q", x, y)
	}
	if x, y := userNames(a.ok("api", "GET", "/iam/users")), userNames(b.ok("api", "GET", "/iam/users")); x != y {
		t.Errorf("users: A %s, B %s", x, y)
	}
	// Restoring twice changes nothing.
	if r = b.run("restore", "-f", file); r.Code != 0 || strings.Contains(r.Stdout, "created") || strings.Contains(r.Stdout, "updated") {
		t.Errorf("second restore onto B: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// alice has no password on B until one is set ...
	uenv := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file"}
	if r := run(t, uenv, "alice password 2\n", "login", "--server", sb.URL, "-u", "alice", "--password-stdin"); r.Code == 0 {
		t.Errorf("alice logged in on B with no password restored")
	}
	// ... and with the secrets her password comes along.
	if r = b.run("restore", "-f", secretFile); r.Code != 0 || !strings.Contains(r.Stdout, "localuser/alice updated") {
		t.Errorf("restore with secrets onto B: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := run(t, uenv, "alice password 2\n", "login", "--server", sb.URL, "-u", "alice", "--password-stdin"); r.Code != 0 {
		t.Errorf("alice cannot log in on B with her password after a restore with secrets: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// checkAnswers asks node s what an admin of A set up.
func checkAnswers(t *testing.T, node string, s *server) {
	t.Helper()
	for _, c := range []struct{ name, want, status string }{
		{"printer.home.lan", "192.0.2.30", "NOERROR"},
		{"nas.home.lan", "192.0.2.10", "NOERROR"},
		{"ads.example.net", "", "NXDOMAIN"}, // denied, answered as blocking.defaultResponse says
	} {
		if got, status := dig(t, s.DNS, c.name, "A"); got != c.want || status != c.status {
			t.Errorf("node %s: dig %s = %q %s, want %q %s", node, c.name, got, status, c.want, c.status)
		}
	}
}

func names(out string) string {
	ls := strings.Fields(out)
	sort.Strings(ls)
	return strings.Join(ls, "\n")
}

func userNames(out string) string {
	var ns []string
	for _, part := range strings.Split(out, `"username":"`)[1:] {
		n, _, _ := strings.Cut(part, `"`)
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return strings.Join(ns, ",")
}
