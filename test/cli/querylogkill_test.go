package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

const killZone = `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: kill.test}
spec:
  defaultTTL: 300
  nameServers: [ns1.kill.test.]
`

// The query log after a kill -9 of the built binary: every row it had
// stored is found again by a domain filter. Its writer keeps the postings
// of the bucket it is filling (16,384 rows) in memory and writes them once
// the bucket is complete, so without the rebuild at start the rows of the
// last bucket would be stored but no filter would find them.
func TestQueryLogFiltersAfterKill(t *testing.T) {
	dir := t.TempDir()
	cfg := nodetest.WriteConfig(t, dir, nodetest.APITLSOff(), nodetest.Lameduck(50*time.Millisecond),
		nodetest.Objects(map[string]string{"zone.yaml": killZone}))
	env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "SERVICE_ADMIN_PASSWORD=" + adminPassword}
	serve := func() (*proc.Server, *user) {
		srv := proc.Serve(t, proc.ServeConfig{Bin: svcBin, Config: cfg, Dir: dir, Env: env})
		u := newUser(t)
		u.okIn(adminPassword+"\n", "login", "--server", "http://"+srv.API(), "-u", "admin", "--password-stdin", "--name", "test")
		return srv, u
	}
	found := func(u *user, name string) int {
		var items []map[string]any
		raw := u.ok("logs", "-o", "json", "--domain", name, "--limit", "1000")
		if err := json.Unmarshal([]byte(raw), &items); err != nil {
			t.Fatalf("logs -o json: %v\n%s", err, raw)
		}
		return len(items)
	}

	srv, u := serve()
	const names, each = 50, 40
	c, err := net.Dial("udp", srv.DNS())
	if err != nil {
		t.Fatal(err)
	}
	dc := &dns.Conn{Conn: c}
	for i := range names * each {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("n%d.kill.test.", i%names), dns.TypeA)
		_ = dc.SetDeadline(time.Now().Add(3 * time.Second))
		if err := dc.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		if r, err := dc.ReadMsg(); err != nil || r.Rcode != dns.RcodeNameError {
			t.Fatalf("query %d: %v %v", i, r, err)
		}
	}
	dc.Close()
	// Stored: the writer's batches are committed.
	nodetest.Eventually(t, 20*time.Second, "every query in svc logs", func() bool {
		return found(u, fmt.Sprintf("n%d.kill.test", names-1)) == each
	})
	srv.Kill()

	_, u = serve()
	for _, i := range []int{0, 7, names - 1} {
		if n := found(u, fmt.Sprintf("n%d.kill.test", i)); n != each {
			t.Errorf("after the kill: --domain n%d.kill.test finds %d rows, want %d", i, n, each)
		}
	}
}
