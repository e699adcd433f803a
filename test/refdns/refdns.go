// Package refdns runs the reference DNS servers tests compare the service
// with or use as its secondaries (NSD and Knot from Debian, installed by
// hack/install-test-deps.sh): one way to find them, start them unprivileged
// in the foreground, keep their log and stop them when the test ends.
package refdns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Require fails the test when the program at path is missing, naming the
// script that installs it.
func Require(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: run hack/install-test-deps.sh (%v)", path, err)
	}
}

// Daemon is a server started by Start; Log reads what it printed so far.
type Daemon struct{ path string }

// Log is the daemon's output so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.path)
	return string(b)
}

// Contains reports whether the daemon's output holds s.
func (d *Daemon) Contains(s string) bool { return strings.Contains(d.Log(), s) }

// Start runs name in the foreground with its output in a log file, and
// stops it (SIGINT, then a kill after 5 s) when the test ends; the log is
// printed when the test failed.
func Start(t testing.TB, name string, args ...string) *Daemon {
	t.Helper()
	cmd := exec.Command(name, args...)
	lf := filepath.Join(t.TempDir(), filepath.Base(name)+".log")
	logf, err := os.Create(lf)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	d := &Daemon{path: lf}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, d.Log())
		}
	})
	return d
}

// NSDConf is an nsd.conf for an unprivileged NSD on 127.0.0.1:port with
// its state in dir: the server section (plus serverExtra, tab-indented
// lines such as "rrl-ratelimit: 0"), remote control off, then rest (keys,
// zones) as given.
func NSDConf(dir string, port, verbosity int, serverExtra []string, rest string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `server:
	ip-address: 127.0.0.1@%[2]d
	port: %[2]d
	do-ip6: no
	username: ""
	chroot: ""
	zonesdir: "%[1]s"
	pidfile: "%[1]s/nsd.pid"
	database: ""
	xfrdfile: "%[1]s/xfrd.state"
	zonelistfile: "%[1]s/zone.list"
	xfrdir: "%[1]s"
	server-count: 1
	minimal-responses: yes
	refuse-any: no
	verbosity: %[3]d
`, dir, port, verbosity)
	for _, l := range serverExtra {
		b.WriteString("\t" + l + "\n")
	}
	b.WriteString("remote-control:\n\tcontrol-enable: no\n")
	b.WriteString(rest)
	return b.String()
}

// KnotConf is a knot.conf for an unprivileged Knot on 127.0.0.1:port with
// its state in dir: the server, database and control sections and a
// stderr log at logLevel ("info", "warning"), then rest (keys, remotes,
// acls, templates, zones) as given.
func KnotConf(dir string, port int, logLevel, rest string) string {
	return fmt.Sprintf(`server:
    listen: 127.0.0.1@%[2]d
    rundir: "%[1]s"
    pidfile: "%[1]s/knot.pid"
database:
    storage: "%[1]s/db"
control:
    listen: "%[1]s/knot.sock"
log:
  - target: stderr
    any: %[3]s
`, dir, port, logLevel) + rest
}

// StartKnot makes dir/db, writes conf (see KnotConf) to dir/knot.conf and
// starts knotd with it, as Start does.
func StartKnot(t testing.TB, dir, conf string) *Daemon {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	cf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return Start(t, "/usr/sbin/knotd", "-c", cf)
}
