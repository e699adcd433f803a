package xfr_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/refdns"
)

// benchRecords is the zone size of BenchmarkAXFRVersusKnot
// (XFR_BENCH_RECORDS overrides: 1000000 is the make bench scenario).
func benchRecords() int {
	if n, err := strconv.Atoi(os.Getenv("XFR_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// BenchmarkAXFRVersusKnot serves the same zone from a node and from Knot
// (as a primary) and transfers it with TSIG from each with the same client
// (miekg/dns, verifying every message): ns/op is the node's, knot-ns/op
// Knot's, ratio the node's time over Knot's.
func BenchmarkAXFRVersusKnot(b *testing.B) {
	refdns.Require(b, "/usr/sbin/knotd")
	n := benchRecords()
	dir := b.TempDir()
	// the service: record sets of 1000 endpoints each
	var y strings.Builder
	fmt.Fprintf(&y, "apiVersion: service.io/v1alpha1\nkind: DNSZone\nmetadata: {name: example.test}\nspec:\n  defaultTTL: 300\n  nameServers: [ns1.example.test.]\n  policy:\n    transferTSIGKeyRefs: [%s]\n", keyName)
	var zf strings.Builder
	fmt.Fprintf(&zf, "$ORIGIN example.test.\n@ 300 IN SOA ns1.example.test. hostmaster.example.test. 1 3600 600 604800 300\n@ 300 IN NS ns1.example.test.\n")
	for i := range n {
		if i%1000 == 0 {
			fmt.Fprintf(&y, "---\napiVersion: service.io/v1alpha1\nkind: DNSRecordSet\nmetadata: {name: r%d, namespace: default}\nspec:\n  zoneRef: {name: example.test}\n  endpoints:\n", i/1000)
		}
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		fmt.Fprintf(&y, "    - {dnsName: h%d.example.test, recordType: A, targets: [%s]}\n", i, ip)
		fmt.Fprintf(&zf, "h%d 300 IN A %s\n", i, ip)
	}
	secretFile := filepath.Join(dir, "xfr.key")
	if err := os.WriteFile(secretFile, []byte(goodSecret), 0o600); err != nil {
		b.Fatal(err)
	}
	node := nodetest.Start(b, nodetest.ReadyWithin(300*time.Second), nodetest.StopWithin(20*time.Second),
		nodetest.ExtraYAML(fmt.Sprintf("\ntsigKeys:\n  - {name: %s, algorithm: hmac-sha256, secretFile: %s}\n", keyName, secretFile)),
		nodetest.Objects(map[string]string{"zone.yaml": y.String()}))
	nodetest.Eventually(b, 300*time.Second, "zone served", func() bool {
		r, err := node.Exchange("udp", time.Second, fmt.Sprintf("h%d.example.test", n-1), dns.TypeA)
		return err == nil && r.Authoritative && len(r.Answer) == 1
	})
	zonePath := filepath.Join(dir, "example.test.zone")
	if err := os.WriteFile(zonePath, []byte(zf.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	knot := startKnotPrimary(b, zonePath)

	axfr := func(addr string) int {
		m := new(dns.Msg)
		m.SetAxfr("example.test.")
		m.SetTsig(keyName+".", dns.HmacSHA256, 300, time.Now().Unix())
		tr := &dns.Transfer{TsigSecret: map[string]string{keyName + ".": goodSecret}, ReadTimeout: time.Minute}
		ch, err := tr.In(m, addr)
		if err != nil {
			b.Fatal(err)
		}
		rrs := 0
		for e := range ch {
			if e.Error != nil {
				b.Fatalf("%s: %v", addr, e.Error)
			}
			rrs += len(e.RR)
		}
		return rrs
	}
	if got, want := axfr(node.DNSAddr("tcp")), n+3; got != want {
		b.Fatalf("node sent %d records, want %d", got, want)
	}
	if got, want := axfr(knot), n+3; got != want {
		b.Fatalf("knot sent %d records, want %d", got, want)
	}
	var knotTime time.Duration
	b.ResetTimer()
	for range b.N {
		axfr(node.DNSAddr("tcp"))
		b.StopTimer()
		start := time.Now()
		axfr(knot)
		knotTime += time.Since(start)
		b.StartTimer()
	}
	b.StopTimer()
	knotPer := float64(knotTime.Nanoseconds()) / float64(b.N)
	b.ReportMetric(knotPer, "knot-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/knotPer, "ratio")
	b.ReportMetric(float64(n), "records")
}

// startKnotPrimary serves zonePath from knotd, transfers allowed with the
// key; it returns the TCP address.
func startKnotPrimary(b *testing.B, zonePath string) string {
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o755); err != nil {
		b.Fatal(err)
	}
	port := freeport.UDPTCP(b)
	conf := fmt.Sprintf(`server:
    listen: 127.0.0.1@%[2]d
    rundir: "%[1]s"
    pidfile: "%[1]s/knot.pid"
database:
    storage: "%[1]s/db"
control:
    listen: "%[1]s/knot.sock"
log:
  - target: stderr
    any: warning
key:
  - id: %[4]s
    algorithm: hmac-sha256
    secret: %[5]s
acl:
  - id: xfr
    key: %[4]s
    action: transfer
template:
  - id: default
    storage: "%[1]s"
    semantic-checks: off
zone:
  - domain: example.test
    file: "%[3]s"
    acl: xfr
    zonefile-sync: -1
    journal-content: none
`, dir, port, zonePath, keyName, goodSecret)
	cf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	refdns.Start(b, "/usr/sbin/knotd", "-c", cf)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	nodetest.Eventually(b, 60*time.Second, "knot serves the zone", func() bool { return serialOf(addr) == 1 })
	return addr
}
