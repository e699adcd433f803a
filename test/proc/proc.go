// Package proc starts the third-party programs tests run beside the
// service (dnsproxy, CoreDNS, q, ...) and finds the ones
// hack/install-dns-clients.sh builds, and builds the svc binary for the
// packages that drive it (MainWithSvc).
package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Process is a program a test started; its output is kept for failure
// messages and it is stopped when the test ends.
type Process struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Log is the program's output so far (stdout and stderr).
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Start runs bin with args in this process's environment; the test stops it.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartEnv(t, nil, bin, args...)
}

// StartEnv is Start with the environment env (nil: this process's).
func StartEnv(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	p := &Process{}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return p
}

// ServiceTool finds a program hack/install-dns-clients.sh builds from the
// module proxy (q, dnsproxy, coredns) in $SERVICE_TOOLS/bin (default
// ~/.cache/service-tools/bin), else on PATH, or fails the test naming the
// script.
func ServiceTool(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("SERVICE_TOOLS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "service-tools")
	}
	p := filepath.Join(dir, "bin", name)
	if _, err := os.Stat(p); err != nil {
		if p, err = exec.LookPath(name); err != nil {
			t.Fatalf("%s not found in %s/bin or PATH: run hack/install-dns-clients.sh (make test-deps)", name, dir)
		}
	}
	return p
}

// MainWithSvc builds cmd/svc once into a temporary directory (mode 0755, so
// an unprivileged user may run it), stores its path in *bin, runs the
// package's tests and removes the directory: the TestMain of every package
// that drives the built binary.
func MainWithSvc(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "svc-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	*bin = filepath.Join(dir, "svc")
	build := exec.Command("go", "build", "-o", *bin, "github.com/svcdns/svc/cmd/svc")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building svc:", err)
		return 1
	}
	return m.Run()
}

// Chromium finds the browser hack/install-browser.sh installs ($CHROMIUM,
// else chromium, chromium-browser or google-chrome on PATH). Without one
// the test is skipped, except under CI, where it fails.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium is not installed and CI is set: run hack/install-browser.sh (make test-deps)")
	}
	t.Skip("Chromium is not installed (hack/install-browser.sh installs it; under CI the test fails instead)")
	return ""
}
