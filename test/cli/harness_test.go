// Package cli_test runs the built svc binary as a user would against a whole
// node started in process on loopback ports.
package cli_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

var update = flag.Bool("update", false, "rewrite golden files")

// svcBin is the binary built once for the package.
var svcBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(proc.MainWithSvc(m, &svcBin))
}

const adminPassword = "correct horse battery staple"

// server is one node started by a test and stopped by its cleanup, with its
// API served over plain HTTP at URL.
type server struct {
	*nodetest.Node
	URL string
}

func startServer(t *testing.T) *server {
	t.Helper()
	n := nodetest.Start(t, nodetest.Lameduck(100*time.Millisecond), nodetest.APITLSOff(), nodetest.SettingsFile(),
		nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	if n.Addrs.API == "" {
		t.Fatal("node reports no API address")
	}
	return &server{Node: n, URL: "http://" + n.Addrs.API}
}

// user is someone running svc with their own home and client config.
type user struct {
	t    *testing.T
	home string
	env  []string
}

func newUser(t *testing.T, extraEnv ...string) *user {
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file",
		"SERVICE_CLI_CONFIG=" + filepath.Join(home, ".config", "service", "config.yaml")}
	return &user{t: t, home: home, env: append(env, extraEnv...)}
}

type result = proc.Result

func (u *user) runIn(stdin string, args ...string) result {
	u.t.Helper()
	return proc.Run(u.t, u.env, stdin, svcBin, args...)
}

func (u *user) run(args ...string) result {
	u.t.Helper()
	return u.runIn("", args...)
}

// ok runs svc and fails the test on a non-zero exit.
func (u *user) ok(args ...string) string {
	u.t.Helper()
	r := u.run(args...)
	if r.Code != 0 {
		u.t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// okIn is ok with standard input.
func (u *user) okIn(stdin string, args ...string) string {
	u.t.Helper()
	r := u.runIn(stdin, args...)
	if r.Code != 0 {
		u.t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// loggedIn returns a user logged in to s as admin.
func loggedIn(t *testing.T, s *server) *user {
	t.Helper()
	u := newUser(t)
	u.okIn(adminPassword+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin", "--name", "test")
	return u
}

var ageRE = regexp.MustCompile(`(?m)[ \t]\d+(s|m|h|d|y)(\d+(s|m|h|d))?[ \t]*$`)

// golden compares got with testdata/<name>, rewriting it with -update. AGE
// values at the end of lines are replaced by <age>.
var serialRE = regexp.MustCompile(`(?m)^(\S+\s+primary\s+)\d+(\s)`)

func golden(t *testing.T, name, got string) {
	t.Helper()
	got = ageRE.ReplaceAllString(got, " <age>")
	// Zone serials derive from resource versions, which depend on how status
	// writes interleave with applies.
	got = serialRE.ReplaceAllString(got, "${1}<serial>${2}")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", name, want, got)
	}
}
