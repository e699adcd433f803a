package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/doctor"
)

// doctorJSON runs svc doctor -o json and decodes the DoctorReport.
func doctorJSON(t *testing.T, u *user, args ...string) (doctor.Report, int) {
	t.Helper()
	r := u.run(append([]string{"doctor", "-o", "json"}, args...)...)
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("svc doctor -o json %v: exit %d, not a DoctorReport: %v\nstdout: %s\nstderr: %s", args, r.Code, err, r.Stdout, r.Stderr)
	}
	return rep, r.Code
}

// check returns the checks named name.
func check(rep doctor.Report, name string) []doctor.Check {
	var out []doctor.Check
	for _, c := range rep.Checks {
		if c.Check == name {
			out = append(out, c)
		}
	}
	return out
}

func wantCheck(t *testing.T, rep doctor.Report, name, status string, words ...string) {
	t.Helper()
	for _, c := range check(rep, name) {
		if c.Status != status {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(c.Message, w)
		}
		if ok {
			return
		}
	}
	t.Errorf("no %s check %s with %q in %+v", status, name, words, rep.Checks)
}

// writeConfig writes a service.yaml with the given node.dataDir and API,
// ops and DNS addresses (metrics and internal off).
func writeConfig(t *testing.T, dataDir, api, ops, dns string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "service.yaml")
	body := fmt.Sprintf("node:\n  dataDir: %s\nlisteners:\n  dns: [{address: %q, protocols: [udp, tcp]}]\n  api: {address: %q}\n  ops: {address: %q}\n  metrics: {address: \"\"}\n  internal: {address: \"\"}\n", dataDir, dns, api, ops)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDoctorChecksFailForTheirCause: each local check of svc doctor fails
// for its real cause and says which setting and what to do (issue #23
// item 9): a data directory that is a file or cannot be created, an API or
// DNS port another process holds (TCP and UDP), a config value refused.
func TestDoctorChecksFailForTheirCause(t *testing.T) {
	u := newUser(t)
	// another process's ports: this test holds a TCP and a UDP port
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	freeDir := t.TempDir()

	cfg := writeConfig(t, freeDir, tcp.Addr().String(), "127.0.0.1:0", udp.LocalAddr().String())
	rep, code := doctorJSON(t, u, "--config", cfg, "--skip-api")
	if code == 0 {
		t.Errorf("doctor with ports taken exited 0")
	}
	wantCheck(t, rep, "ports", doctor.Fail, "listeners.api.address tcp/"+tcp.Addr().String()+" is in use by another process",
		"listeners.dns udp/"+udp.LocalAddr().String()+" is in use by another process")
	wantCheck(t, rep, "dataDir", doctor.OK, freeDir)
	wantCheck(t, rep, "config", doctor.OK)
	if rep.Failures != len(failed(rep)) || rep.Failures == 0 || rep.Version == "" || rep.Node == "" {
		t.Errorf("DoctorReport counts: failures %d for %d failed checks, node %q version %q", rep.Failures, len(failed(rep)), rep.Node, rep.Version)
	}

	// node.dataDir is a file
	file := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(file, nil, 0o644)
	rep, _ = doctorJSON(t, u, "--config", writeConfig(t, file, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"), "--skip-api")
	wantCheck(t, rep, "dataDir", doctor.Fail, file, "is not a directory")
	wantCheck(t, rep, "ports", doctor.OK, "free")

	// node.dataDir cannot be created: its parent refuses new files (even for root)
	rep, _ = doctorJSON(t, u, "--config", writeConfig(t, "/proc/service-doctor/data", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"), "--skip-api")
	wantCheck(t, rep, "dataDir", doctor.Fail, "/proc/service-doctor/data does not exist and cannot be created", "/proc is not writable")

	// node.dataDir missing but creatable: a warning, not a failure
	rep, code = doctorJSON(t, u, "--config", writeConfig(t, filepath.Join(freeDir, "later"), "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"), "--skip-api")
	wantCheck(t, rep, "dataDir", doctor.Warn, "does not exist yet")
	if code != 0 || rep.Warnings == 0 {
		t.Errorf("doctor with only a warning: exit %d, warnings %d", code, rep.Warnings)
	}

	// a refused value names the key
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("cache:\n  maxEntries: -1\n"), 0o644)
	rep, code = doctorJSON(t, u, "--config", bad, "--skip-api")
	wantCheck(t, rep, "config", doctor.Fail, "cache.maxEntries")
	if code == 0 {
		t.Errorf("doctor with a refused config exited 0")
	}

	// no server where the context points
	rep, _ = doctorJSON(t, u, "--config", writeConfig(t, freeDir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"), "--server", "http://"+tcp.Addr().String()+"/nothing-here", "--skip-ports")
	if len(check(rep, "api")) != 1 || check(rep, "api")[0].Status != doctor.Fail {
		t.Errorf("doctor against a server that is not one: %+v", rep.Checks)
	}
}

func failed(rep doctor.Report) []doctor.Check {
	var out []doctor.Check
	for _, c := range rep.Checks {
		if c.Status == doctor.Fail {
			out = append(out, c)
		}
	}
	return out
}

// TestDoctorWithRunningNode: svc doctor includes the node's own report
// (GET /doctor, as node/<check>); the ports the running node holds count as
// held, not taken; an edit of the node's config file that would stop its
// next start fails node/config; a restart setting changed through the API
// warns node/restart.
func TestDoctorWithRunningNode(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)

	// A config naming the very addresses the node bound.
	cfg := writeConfig(t, t.TempDir(), s.Addrs.API, s.Addrs.Ops, s.DNSAddr("udp"))
	rep, code := doctorJSON(t, u, "--config", cfg)
	if code != 0 {
		t.Errorf("doctor against a healthy node exited %d: %+v", code, rep.Checks)
	}
	wantCheck(t, rep, "ports", doctor.OK, "held by the running node")
	wantCheck(t, rep, "node/config", doctor.OK, s.ConfigPath)
	wantCheck(t, rep, "node/ready", doctor.OK)
	wantCheck(t, rep, "node/listeners", doctor.OK, "tcp/"+s.Addrs.API)
	wantCheck(t, rep, "node/restart", doctor.OK)
	wantCheck(t, rep, "token", doctor.OK, "authenticated as")

	// the same served by the API itself: DoctorReport
	r := u.run("api", "GET", "/doctor")
	var direct doctor.Report
	if err := json.Unmarshal([]byte(r.Stdout), &direct); err != nil || direct.Node == "" || len(direct.Checks) == 0 || direct.TookMS <= 0 {
		t.Errorf("GET /doctor = %s (%v)", r.Stdout, err)
	}

	// a restart setting changed live
	u.ok("settings", "set", "blocking.refreshInterval=2h")
	rep, _ = doctorJSON(t, u, "--config", cfg)
	wantCheck(t, rep, "node/restart", doctor.Warn, "blocking.refreshInterval")

	// the node's config file broken while it runs
	orig, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.ConfigPath, append(orig, []byte("\ncache:\n  maxEntries: -5\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(s.ConfigPath, orig, 0o644)
	rep, code = doctorJSON(t, u, "--config", cfg)
	wantCheck(t, rep, "node/config", doctor.Fail, "cache.maxEntries", "next start")
	if code == 0 {
		t.Errorf("doctor with the node's config broken exited 0")
	}
}
