// Package cli_test runs the built svc binary as a user would against a whole
// node started in process on loopback ports.
package cli_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/node"
)

var update = flag.Bool("update", false, "rewrite golden files")

// svcBin is the binary built once for the package.
var svcBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "svc-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	svcBin = filepath.Join(dir, "svc")
	build := exec.Command("go", "build", "-o", svcBin, "github.com/svcdns/svc/cmd/svc")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building svc:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const adminPassword = "correct horse battery staple"

const nodeConfig = `
node:
  dataDir: %DATA%
  lameduck: 100ms
listeners:
  dns:
    - address: 127.0.0.1:0
      protocols: [udp, tcp]
  api:
    address: 127.0.0.1:0
    tls:
      auto: "off"
  ops:
    address: 127.0.0.1:0
  metrics:
    address: 127.0.0.1:0
  internal:
    address: 127.0.0.1:0
  blockPage:
    http: ""
upstreams:
  groups:
    default:
      servers: [127.0.0.1:1]
      timeout: 200ms
objectsDir: %OBJ%
settingsFile: %DATA%/settings.yaml
auth:
  adminSocket:
    path: %DATA%/service.sock
`

// server is one node started by a test and stopped by its cleanup.
type server struct {
	URL   string
	Addrs node.Addrs
	Dir   string
}

func startServer(t *testing.T) *server {
	t.Helper()
	dir := t.TempDir()
	objDir := filepath.Join(dir, "objects.d")
	if err := os.MkdirAll(objDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("%DATA%", filepath.Join(dir, "data"), "%OBJ%", objDir).Replace(nodeConfig)
	cfgPath := filepath.Join(dir, "service.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan node.Addrs, 1)
	var logs bytes.Buffer
	go func() {
		done <- node.Run(ctx, node.Options{ConfigPath: cfgPath, ConfigExplicit: true,
			Environ: []string{"SERVICE_ADMIN_PASSWORD=" + adminPassword},
			Stderr:  &syncWriter{w: &logs}, Ready: func(a node.Addrs) { ready <- a }})
	}()
	s := &server{Dir: dir}
	select {
	case s.Addrs = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("node stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("node not ready within 60s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("node did not stop within 15s")
		}
	})
	if s.Addrs.API == "" {
		t.Fatal("node reports no API address")
	}
	s.URL = "http://" + s.Addrs.API
	return s
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

type result struct {
	stdout, stderr string
	code           int
}

func (u *user) runIn(stdin string, args ...string) result {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, args...)
	cmd.Env = u.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatalf("svc %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

func (u *user) run(args ...string) result {
	u.t.Helper()
	return u.runIn("", args...)
}

// ok runs svc and fails the test on a non-zero exit.
func (u *user) ok(args ...string) string {
	u.t.Helper()
	r := u.run(args...)
	if r.code != 0 {
		u.t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okIn is ok with standard input.
func (u *user) okIn(stdin string, args ...string) string {
	u.t.Helper()
	r := u.runIn(stdin, args...)
	if r.code != 0 {
		u.t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
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

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not true within %s", what, d)
}
