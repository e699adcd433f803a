package transport_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcdns/svc/dataplane/transport"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadCase is one transport's load shape.
type loadCase struct {
	name, kind    string
	flows, window int
	qps, cpuPerQ  []float64 // per round
	allocsPerQ    []float64
	bytesPerQ     []float64
}

// BenchmarkTransportRatio measures queries per second of Do53 UDP, DoT and
// DoH (HTTP/2, POST) for the same authoritative answer, in the same run,
// and reports DoT and DoH as ratios of UDP (medians over rounds, the
// transports interleaved in every round). On a shared machine the qps of
// one round swing with other load; the server CPU time per answer (and
// its ratio, UDP's over the transport's: the qps ratio of a CPU-bound
// server) is the steadier figure. The load generator is a child
// process (loadgen_test.go) with GOMAXPROCS=SVC_BENCH_CLIENT_PROCS
// (default 1; the server keeps the rest); server CPU time, allocations and
// bytes per answer come from this process only.
//
//	go test ./test/transport -run '^$' -bench Ratio -benchtime 1x
//
// SVC_BENCH_ROUNDS (3), SVC_BENCH_SECONDS (2), SVC_BENCH_PROFILE=dir
// writes server CPU and allocation profiles per transport (last round).
func BenchmarkTransportRatio(b *testing.B) {
	st := newStack(b, stackOpts{bench: true, transport: func(c *transport.Config) {
		c.MaxConns = 20000
		c.IdleTimeout = time.Minute
	}})
	rounds := envInt("SVC_BENCH_ROUNDS", 3)
	dur := time.Duration(envInt("SVC_BENCH_SECONDS", 2)) * time.Second
	procs := envInt("SVC_BENCH_CLIENT_PROCS", 1)
	prof := os.Getenv("SVC_BENCH_PROFILE")
	cases := []*loadCase{
		{name: "udp", kind: "udp", flows: 8, window: 50},
		{name: "dot", kind: "dot", flows: 100, window: 4},
		{name: "doh", kind: "doh", flows: 100, window: 4},
		{name: "doh4x100", kind: "doh", flows: 4, window: 100},
		// One query in flight per connection: dnsperf's default (-q 100
		// over -c 100) and what a stub resolver does.
		{name: "dot100x1", kind: "dot", flows: 100, window: 1},
		{name: "doh100x1", kind: "doh", flows: 100, window: 1},
	}
	for r := range rounds {
		for _, c := range cases {
			args := helperArgs{Mode: "load", Kind: c.kind, Addr: st.addr(c.kind).String(), CAFile: st.pki.CAFile,
				Flows: c.flows, Window: c.window, Duration: dur}
			cmd, out, in := startHelper(b, args, procs)
			// The child dials first (not measured), prints "start", runs
			// for dur and prints its result.
			if l, err := out.ReadString('\n'); err != nil || l != "start\n" {
				b.Fatalf("%s: helper said %q %v", c.name, l, err)
			}
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			c0 := cpuTime()
			if prof != "" && r == rounds-1 {
				f, err := os.Create(filepath.Join(prof, c.name+".cpu.pprof"))
				if err != nil {
					b.Fatal(err)
				}
				_ = pprof.StartCPUProfile(f)
				defer f.Close()
			}
			line, err := out.ReadString('\n')
			c1 := cpuTime()
			runtime.ReadMemStats(&ms1)
			if prof != "" && r == rounds-1 {
				pprof.StopCPUProfile()
				f, _ := os.Create(filepath.Join(prof, c.name+".allocs.pprof"))
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			in.Close()
			_ = cmd.Wait()
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			var res loadResult
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				b.Fatalf("%s: %q: %v", c.name, line, err)
			}
			if res.Errors > 0 || res.Answers == 0 {
				b.Fatalf("%s: %+v", c.name, res)
			}
			c.qps = append(c.qps, float64(res.Answers)/res.Seconds)
			c.cpuPerQ = append(c.cpuPerQ, float64((c1-c0).Microseconds())/float64(res.Answers))
			c.allocsPerQ = append(c.allocsPerQ, float64(ms1.Mallocs-ms0.Mallocs)/float64(res.Answers))
			c.bytesPerQ = append(c.bytesPerQ, float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(res.Answers))
		}
	}
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	udp, udpCPU := med(cases[0].qps), med(cases[0].cpuPerQ)
	var sb strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&sb, "%-9s flows=%3d window=%3d qps=%8.0f (rounds %v) ratio=%.2f server: %.1f µs CPU (ratio %.2f), %.1f allocs, %.0f B per answer\n",
			c.name, c.flows, c.window, med(c.qps), roundAll(c.qps), med(c.qps)/udp, med(c.cpuPerQ), udpCPU/med(c.cpuPerQ), med(c.allocsPerQ), med(c.bytesPerQ))
		b.ReportMetric(med(c.qps), c.name+"-qps")
		if c != cases[0] {
			b.ReportMetric(med(c.qps)/udp, c.name+"/udp")
		}
		b.ReportMetric(med(c.cpuPerQ), c.name+"-µs/q")
	}
	b.Log("\n" + sb.String())
}

func roundAll(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// BenchmarkIdleConns holds SVC_BENCH_IDLE (10000) idle DoT connections and
// as many idle DoQ connections from a child process, and reports the
// server's heap+stack bytes and goroutines per connection; while they are
// held, a new client must still be answered.
//
//	go test ./test/transport -run '^$' -bench Idle -benchtime 1x
func BenchmarkIdleConns(b *testing.B) {
	n := envInt("SVC_BENCH_IDLE", 10000)
	for _, kind := range []string{"dot", "doq", "doh", "doh1"} {
		b.Run(kind, func(b *testing.B) {
			addrKind := kind
			if kind == "doh1" {
				addrKind = "doh" // the same listener, ALPN http/1.1
			}
			st := newStack(b, stackOpts{bench: true, transport: func(c *transport.Config) {
				c.MaxConns = n + 100
				c.IdleTimeout = 5 * time.Minute
			}})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&before)
			g0 := runtime.NumGoroutine()
			args := helperArgs{Mode: "idle", Kind: kind, Addr: st.addr(addrKind).String(), CAFile: st.pki.CAFile, Flows: n}
			cmd, out, in := startHelper(b, args, 2)
			defer func() { in.Close(); _ = cmd.Wait() }()
			line, err := out.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			var held int
			if _, err := fmt.Sscanf(line, "ready %d", &held); err != nil || held == 0 {
				b.Fatalf("helper: %q", line)
			}
			time.Sleep(time.Second)
			runtime.GC()
			runtime.GC() // twice: shrink stacks of parked goroutines
			runtime.ReadMemStats(&after)
			g1 := runtime.NumGoroutine()
			if prof := os.Getenv("SVC_BENCH_PROFILE"); prof != "" {
				if f, err := os.Create(filepath.Join(prof, "idle-"+kind+".heap.pprof")); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
			t0 := time.Now()
			if _, err := in.Write([]byte("ask\n")); err != nil {
				b.Fatal(err)
			}
			ans, err := out.ReadString('\n')
			if err != nil || strings.TrimSpace(ans) != "ok" {
				b.Fatalf("new client while %d idle %s connections held: %q %v", held, kind, ans, err)
			}
			newClient := time.Since(t0)
			per := float64(int64(after.HeapInuse+after.StackInuse)-int64(before.HeapInuse+before.StackInuse)) / float64(held)
			b.ReportMetric(float64(held), "conns")
			b.ReportMetric(per, "B/conn")
			b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/float64(held), "stackB/conn")
			b.ReportMetric(float64(g1-g0)/float64(held), "goroutines/conn")
			b.ReportMetric(float64(newClient.Milliseconds()), "new-client-ms")
		})
	}
}
