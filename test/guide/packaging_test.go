package guide_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/settings"
)

// makeInstall runs `make install DESTDIR=<new directory> BIN=<the test's
// svc>` plus extra make arguments, as an unprivileged user (nobody) when
// the test runs as root: the target must never need root. It returns the
// DESTDIR, removed in owner's cleanup (nil: t's).
func makeInstall(t, owner *testing.T, repo string, extra ...string) string {
	t.Helper()
	if owner == nil {
		owner = t
	}
	// Not below t.TempDir: its 0700 parents would keep nobody out.
	destdir, err := os.MkdirTemp("", "svc-guide-install-")
	if err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() { os.RemoveAll(destdir) })
	if err := os.Chmod(destdir, 0o777); err != nil {
		t.Fatal(err)
	}
	runMakeInstall(t, repo, destdir, extra...)
	return destdir
}

func runMakeInstall(t *testing.T, repo, destdir string, extra ...string) string {
	t.Helper()
	if os.Geteuid() == 0 {
		// nobody may not be able to read the checkout (/root/...): give make
		// a world-readable copy of what install reads.
		repo = installInputs(t, repo)
	}
	args := append([]string{"make", "--no-print-directory", "-C", repo, "install", "DESTDIR=" + destdir, "BIN=" + svcBin}, extra...)
	if os.Geteuid() == 0 {
		args = append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	// A clean environment: no MAKEFLAGS of an outer make, no root HOME.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + destdir, "LANG=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// installInputs copies the files `make install` reads (the Makefile,
// packaging/ and docs/admin-guide.md) to a new world-readable directory.
func installInputs(t *testing.T, repo string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "svc-guide-checkout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"Makefile", "packaging", filepath.Join("docs", "admin-guide.md")} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-R", filepath.Join(repo, p), filepath.Join(dir, p)).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v\n%s", p, err, out)
		}
	}
	if out, err := exec.Command("chmod", "-R", "a+rX", dir).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v\n%s", err, out)
	}
	return dir
}

// TestMakeInstall lays out the files with `make install DESTDIR=...` as an
// unprivileged user and checks each: the binary runs, the unit points at
// it, the example config is the packaging one, and a second install (an
// upgrade) keeps an edited /etc/service/service.yaml.
func TestMakeInstall(t *testing.T) {
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	destdir := makeInstall(t, nil, repo)
	want := map[string]os.FileMode{
		"usr/local/bin/svc":                        0o755,
		"usr/local/lib/systemd/system/svc.service": 0o644,
		"etc/service/service.yaml":                 0o644,
		"etc/service/service.yaml.example":         0o644,
		"usr/local/share/doc/svc/admin-guide.md":   0o644,
	}
	for rel, mode := range want {
		fi, err := os.Stat(filepath.Join(destdir, rel))
		if err != nil {
			t.Errorf("make install did not create %s: %v", rel, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode().Perm(), mode)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && st.Uid != 65534 {
			t.Errorf("%s: owned by uid %d: make install did not run unprivileged", rel, st.Uid)
		}
	}
	if fi, err := os.Stat(filepath.Join(destdir, "etc/service/objects.d")); err != nil || !fi.IsDir() {
		t.Errorf("make install did not create etc/service/objects.d (objectsDir of the example): %v", err)
	}
	if out, err := exec.Command(filepath.Join(destdir, "usr/local/bin/svc"), "version").CombinedOutput(); err != nil {
		t.Errorf("installed svc version: %v\n%s", err, out)
	}
	unit := readUnit(t, filepath.Join(destdir, "usr/local/lib/systemd/system/svc.service"))
	if got := unit["ExecStart"]; got != "/usr/local/bin/svc serve --config /etc/service/service.yaml" {
		t.Errorf("installed unit ExecStart = %q", got)
	}
	example := readFile(t, filepath.Join(repo, "packaging", "service.yaml"))
	if got := readFile(t, filepath.Join(destdir, "etc/service/service.yaml")); got != example {
		t.Error("etc/service/service.yaml is not packaging/service.yaml")
	}

	// An upgrade: the admin's config stays, the example is refreshed.
	cfg := filepath.Join(destdir, "etc/service/service.yaml")
	edited := example + "\n# edited by the admin\n"
	if err := os.WriteFile(cfg, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	runMakeInstall(t, repo, destdir)
	if got := readFile(t, cfg); got != edited {
		t.Error("a second make install overwrote the admin's /etc/service/service.yaml")
	}

	// PREFIX moves the binary and the unit, and the unit follows.
	usr := makeInstall(t, nil, repo, "PREFIX=/usr")
	if _, err := os.Stat(filepath.Join(usr, "usr/bin/svc")); err != nil {
		t.Errorf("PREFIX=/usr: %v", err)
	}
	unit = readUnit(t, filepath.Join(usr, "usr/lib/systemd/system/svc.service"))
	if got := unit["ExecStart"]; !strings.HasPrefix(got, "/usr/bin/svc serve") {
		t.Errorf("PREFIX=/usr: unit ExecStart = %q, want /usr/bin/svc", got)
	}
}

// TestSystemdUnit checks packaging/systemd/svc.service with systemd's own
// tools (any warning of systemd-analyze verify fails, as an unknown key is
// only a warning there) and the promises the guide makes about it.
func TestSystemdUnit(t *testing.T) {
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	src := filepath.Join(repo, "packaging", "systemd", "svc.service")
	unit := readUnit(t, src)
	for k, v := range map[string]string{
		"AmbientCapabilities":   "CAP_NET_BIND_SERVICE",
		"CapabilityBoundingSet": "CAP_NET_BIND_SERVICE",
		"User":                  "svc",
		"DynamicUser":           "yes",
		"StateDirectory":        "service",
		"RuntimeDirectory":      "service",
		"WorkingDirectory":      "/var/lib/service",
		"NoNewPrivileges":       "yes",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
	} {
		if unit[k] != v {
			t.Errorf("%s: %s=%q, want %q", src, k, unit[k], v)
		}
	}
	// StateDirectory and RuntimeDirectory are what the config and the
	// defaults use: node.dataDir and the admin socket.
	eff := exampleSettings(t, repo)
	if got := eff["node.dataDir"]; got != "/var/lib/service" {
		t.Errorf("packaging/service.yaml node.dataDir = %v, want /var/lib/service (StateDirectory=service)", got)
	}
	if got := eff["auth.adminSocket.path"]; !strings.HasPrefix(fmt.Sprint(got), "/run/service/") {
		t.Errorf("auth.adminSocket.path = %v, want below /run/service (RuntimeDirectory=service)", got)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd): the unit's keys were checked, not verified by systemd")
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name, "svc.service")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		// verify checks that ExecStart exists: point it at the test's binary.
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "/usr/local/bin/svc", svcBin)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	verify := func(path string) string {
		out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("exit %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	text := readFile(t, src)
	good := write("good", text)
	if out := verify(good); out != "" {
		t.Errorf("systemd-analyze verify %s:\n%s", src, out)
	}
	// The check is real: a misspelt key is reported.
	if out := verify(write("typo", strings.Replace(text, "ProtectSystem=", "ProtectSystme=", 1))); !strings.Contains(out, "ProtectSystme") {
		t.Errorf("systemd-analyze verify did not report a misspelt key: %q", out)
	}
	out, err := exec.Command(analyze, "security", "--offline=yes", "--no-pager", good).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Overall exposure level") {
		t.Skipf("systemd-analyze security --offline not supported here: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for svc\.service: ([0-9.]+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(m[1], 64); level > 2.5 {
		t.Errorf("systemd-analyze security rates the unit %s (the guide promises about 1.9; at most 2.5):\n%s", m[1], out)
	}
}

// exampleSettings loads packaging/service.yaml with the server's own
// settings loader (unknown keys and invalid values are errors) and returns
// the effective values by key.
func exampleSettings(t *testing.T, repo string) map[string]any {
	t.Helper()
	mgr, err := settings.Load(context.Background(), settings.Options{
		ConfigPath: filepath.Join(repo, "packaging", "service.yaml"), ConfigPathExplicit: true})
	if err != nil {
		t.Fatalf("packaging/service.yaml does not load: %v", err)
	}
	return mgr.Effective(true)
}

// TestExampleConfig: the example is the LAN setup the guide describes:
// DNS on port 53 of every address, the API on 8443.
func TestExampleConfig(t *testing.T) {
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	eff := exampleSettings(t, repo)
	dnsJSON, _ := json.Marshal(eff["listeners.dns"])
	if !strings.Contains(string(dnsJSON), `"address":"0.0.0.0:53"`) {
		t.Errorf("listeners.dns = %s, want 0.0.0.0:53", dnsJSON)
	}
	if got := eff["listeners.api.address"]; got != "0.0.0.0:8443" {
		t.Errorf("listeners.api.address = %v, want 0.0.0.0:8443", got)
	}
	if got := eff["settingsFile"]; got == "" || got == nil {
		t.Error("settingsFile is empty: `svc settings set` (the guide's upstreams step) would be refused read_only")
	}
}
