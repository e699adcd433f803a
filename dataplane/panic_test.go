package dataplane

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a log sink the server's goroutines may write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A panic in any stage answers that query SERVFAIL with EDE Other, is
// counted by stage and logged once with its stack; the server keeps
// answering everyone else.
func TestStagePanicIsContained(t *testing.T) {
	for _, stageName := range []string{"ingress", "identify", "blocking", "cache", "log"} {
		t.Run(stageName, func(t *testing.T) {
			var logs syncBuffer
			reg := prometheus.NewRegistry()
			s, err := New(testConfig(), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			s.Swap(NewSnapshot(SnapshotInput{Version: "t", Authority: testTable(t)}))
			idx := -1
			for i, st := range s.stages {
				if st.name == stageName {
					idx = i
				}
			}
			if idx < 0 {
				t.Fatalf("no stage %q", stageName)
			}
			orig := s.stages[idx].run
			s.stages[idx].run = func(s *Server, q *Query) stageResult {
				// ingress runs before the name is parsed: look at the bytes
				if bytes.Contains(q.in, []byte("\x04boom")) {
					panic("injected failure")
				}
				return orig(s, q)
			}
			if err := s.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Shutdown(t.Context()) })

			for _, proto := range []string{"udp", "tcp"} {
				// outside the zone, so the name reaches every stage
				m := query("boom.elsewhere.test.", dns.TypeA)
				m.SetEdns0(1232, false)
				r := exchange(t, s, proto, m)
				if r.Rcode != dns.RcodeServerFailure {
					t.Fatalf("%s: rcode %s, want SERVFAIL", proto, dns.RcodeToString[r.Rcode])
				}
				// the log stage runs after the answer is decided; ingress has
				// no question to attach an EDNS option to
				if stageName != "log" && stageName != "ingress" {
					ede := findEDE(r)
					if ede == nil || ede.InfoCode != dns.ExtendedErrorCodeOther || !strings.Contains(ede.ExtraText, stageName) {
						t.Fatalf("%s: EDE %v, want Other naming stage %s", proto, ede, stageName)
					}
				}
				// the next client is answered normally
				ok := exchange(t, s, proto, query("www.example.com.", dns.TypeA))
				if ok.Rcode != dns.RcodeSuccess || len(ok.Answer) == 0 {
					t.Fatalf("%s: after a panic: %s with %d answers", proto, dns.RcodeToString[ok.Rcode], len(ok.Answer))
				}
			}
			if n := testutil.ToFloat64(s.metrics.panics[idx]); n != 2 {
				t.Fatalf("service_dns_panics_total{stage=%q} = %v, want 2", stageName, n)
			}
			out := logs.String()
			if c := strings.Count(out, "query stage panicked"); c != 1 {
				t.Fatalf("panic logged %d times within a second, want 1:\n%s", c, out)
			}
			if !strings.Contains(out, "injected failure") || !strings.Contains(out, "panic_test.go") {
				t.Fatalf("log line lacks the panic value or its stack:\n%s", out)
			}
		})
	}
}

func findEDE(m *dns.Msg) *dns.EDNS0_EDE {
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				return e
			}
		}
	}
	return nil
}
