package xfr_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/xfr"
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

// BenchmarkAXFRVersusKnot serves the same zone from the service and from
// Knot (as a primary), each in its own process, and transfers it with TSIG
// from each with the same client (miekg/dns, verifying every message):
// ns/op is the service's, knot-ns/op Knot's, ratio the service's time over
// Knot's. Memory is each server's own: RSS once the zone is loaded and the
// peak RSS during the transfers (VmHWM, reset after the load), rss-ratio
// the service's peak over Knot's.
//
// The service side is its serving code alone (authority.Compile of the
// zone's DNSZone and record sets, dataplane.Server with the xfr handler on
// a TCP listener, the journal fed as the node feeds it) in a child process
// (TestXFRBenchServer): loading a million records through the store and
// the API takes minutes and is not what this measures.
func BenchmarkAXFRVersusKnot(b *testing.B) {
	refdns.Require(b, "/usr/sbin/knotd")
	n := benchRecords()
	dir := b.TempDir()
	var zf strings.Builder
	fmt.Fprintf(&zf, "$ORIGIN example.test.\n@ 300 IN SOA ns1.example.test. hostmaster.example.test. 1 3600 600 604800 300\n@ 300 IN NS ns1.example.test.\n")
	for i := range n {
		fmt.Fprintf(&zf, "h%d 300 IN A %s\n", i, benchIP(i))
	}
	loadStart := time.Now()
	svcPID, svcAddr := startBenchServer(b, n)
	svcLoad := time.Since(loadStart)
	zonePath := filepath.Join(dir, "example.test.zone")
	if err := os.WriteFile(zonePath, []byte(zf.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	loadStart = time.Now()
	knot, knotPID := startKnotPrimary(b, zonePath)
	knotLoad := time.Since(loadStart)

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
	svcRSS, knotRSS := procKB(b, svcPID, "VmRSS"), procKB(b, knotPID, "VmRSS")
	resetPeak(b, svcPID)
	resetPeak(b, knotPID)
	if got, want := axfr(svcAddr), n+3; got != want {
		b.Fatalf("the service sent %d records, want %d", got, want)
	}
	if got, want := axfr(knot), n+3; got != want {
		b.Fatalf("knot sent %d records, want %d", got, want)
	}
	var knotTime time.Duration
	b.ResetTimer()
	for range b.N {
		axfr(svcAddr)
		b.StopTimer()
		start := time.Now()
		axfr(knot)
		knotTime += time.Since(start)
		b.StartTimer()
	}
	b.StopTimer()
	svcPeak, knotPeak := procKB(b, svcPID, "VmHWM"), procKB(b, knotPID, "VmHWM")
	knotPer := float64(knotTime.Nanoseconds()) / float64(b.N)
	b.ReportMetric(knotPer, "knot-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/knotPer, "ratio")
	b.ReportMetric(float64(n), "records")
	b.ReportMetric(float64(svcRSS)/1024, "svc-rss-MB")
	b.ReportMetric(float64(knotRSS)/1024, "knot-rss-MB")
	b.ReportMetric(float64(svcPeak)/1024, "svc-peak-MB")
	b.ReportMetric(float64(knotPeak)/1024, "knot-peak-MB")
	b.ReportMetric(float64(svcPeak)/float64(knotPeak), "rss-ratio")
	b.Logf("%d records: loaded in %s (service: build and compile) and %s (Knot: read the zone file)", n, svcLoad.Round(time.Millisecond), knotLoad.Round(time.Millisecond))
}

func benchIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// TestXFRBenchServer is the service side of BenchmarkAXFRVersusKnot when
// the benchmark runs this test binary with XFR_BENCH_SERVE=N; otherwise it
// does nothing. It compiles example.test with N A records (record sets of
// 1000, as an import writes them), serves it with the xfr handler on a TCP
// listener, prints "LISTEN addr" and serves until its stdin closes.
func TestXFRBenchServer(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("XFR_BENCH_SERVE"))
	if err != nil {
		return // not the benchmark's child process
	}
	z := v1alpha1.DNSZone{}
	z.Name, z.UID, z.Generation, z.ResourceVersion = "example.test", "uid-z", 1, "1"
	z.Spec.NameServers = []string{"ns1.example.test."}
	z.Spec.SOA = &v1alpha1.SOA{Serial: 1}
	z.Spec.Policy = &v1alpha1.ZonePolicy{TransferTSIGKeyRefs: []string{keyName}}
	var sets []v1alpha1.DNSRecordSet
	for i := range n {
		if i%1000 == 0 {
			rs := v1alpha1.DNSRecordSet{}
			rs.Namespace, rs.Name, rs.UID, rs.Generation = "default", fmt.Sprintf("r%d", i/1000), "uid", 1
			rs.Spec.ZoneRef.Name = "example.test"
			sets = append(sets, rs)
		}
		rs := &sets[len(sets)-1]
		rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{DNSName: fmt.Sprintf("h%d.example.test", i), RecordType: "A", Targets: []string{benchIP(i)}})
	}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, sets, time.Now())
	if len(problems) > 0 {
		t.Fatalf("compile: %v", problems[0])
	}
	sets = nil // the objects are the store's; only the table is served
	dp, err := dataplane.New(dataplane.Config{Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"tcp"}}}}, dataplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := xfr.New(xfr.Config{Keys: xfr.Keyring{keyName + ".": {Name: keyName + ".", Algorithm: dns.HmacSHA256, Secret: goodSecret}}})
	dp.SetTransfers(srv)
	dp.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Authority: tab, Version: "1"}))
	srv.Observe(tab)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := dp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	fmt.Printf("LISTEN %s\n", dp.TCPAddrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes it
	sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
	defer c()
	_ = dp.Shutdown(sctx)
}

// startBenchServer runs TestXFRBenchServer in a child process serving n
// records and returns its pid and TCP address; the child ends with the
// benchmark.
func startBenchServer(b *testing.B, n int) (int, string) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestXFRBenchServer$", "-test.v")
	cmd.Env = append(os.Environ(), "XFR_BENCH_SERVE="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
				addr <- a
			}
		}
	}()
	b.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = cmd.Wait()
	})
	select {
	case a := <-addr:
		return cmd.Process.Pid, a
	case <-done:
		b.Fatalf("the service's transfer server exited before it listened")
	case <-time.After(10 * time.Minute):
		b.Fatalf("the service's transfer server did not listen within 10 minutes")
	}
	return 0, ""
}

// procKB reads a kB field (VmRSS, VmHWM) of /proc/PID/status.
func procKB(b *testing.B, pid int, field string) int64 {
	b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("%s of %d: %v", field, pid, err)
			}
			return v
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resetPeak resets the process's peak RSS (VmHWM) to its current RSS, so
// the peak measured afterwards is the transfers', not the zone load's.
func resetPeak(b *testing.B, pid int) {
	b.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200); err != nil {
		b.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
}

// startKnotPrimary serves zonePath from knotd, transfers allowed with the
// key; it returns the TCP address and knotd's pid.
func startKnotPrimary(b *testing.B, zonePath string) (string, int) {
	dir := b.TempDir()
	port := freeport.UDPTCP(b)
	conf := refdns.KnotConf(dir, port, "warning", fmt.Sprintf(`key:
  - id: %[3]s
    algorithm: hmac-sha256
    secret: %[4]s
acl:
  - id: xfr
    key: %[3]s
    action: transfer
template:
  - id: default
    storage: "%[1]s"
    semantic-checks: off
zone:
  - domain: example.test
    file: "%[2]s"
    acl: xfr
    zonefile-sync: -1
    journal-content: none
`, dir, zonePath, keyName, goodSecret))
	refdns.StartKnot(b, dir, conf)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	nodetest.Eventually(b, 600*time.Second, "knot serves the zone", func() bool { return serialOf(addr) == 1 })
	pid := 0
	nodetest.Eventually(b, 10*time.Second, "knot.pid written", func() bool {
		raw, err := os.ReadFile(filepath.Join(dir, "knot.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil && pid > 0
	})
	return addr, pid
}
