package edge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/freeport"
)

// mutable is a Source a test changes.
type mutable struct {
	mu sync.Mutex
	b  []Backend
}

func (m *mutable) set(b ...Backend) { m.mu.Lock(); m.b = b; m.mu.Unlock() }
func (m *mutable) Backends(context.Context) ([]Backend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Backend(nil), m.b...), nil
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestSupervisorFollowsBackendsWithoutDropping runs the supervisor with a
// real dnsdist while a client asks continuously: a second node is added,
// then the first removed (set down, drained, removed) through the console,
// without a restart and without one query failing; on cancel dnsdist is
// stopped.
func TestSupervisorFollowsBackendsWithoutDropping(t *testing.T) {
	bin := requireDnsdist(t)
	a, b := fakeupstream.BehindProxy(t, "127.0.0.1", "192.0.2.1"), fakeupstream.BehindProxy(t, "127.0.0.1", "192.0.2.2")
	src := &mutable{}
	src.set(Backend{Name: "a", Address: a})
	c := Defaults()
	c.Listen = fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(t))
	c.Console = fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(t))
	c.API = fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(t))
	c.Threads = 1
	var logs syncBuf
	dir := t.TempDir()
	s := &Supervisor{Template: c, Bin: bin, Dir: dir, Source: src, Poll: 100 * time.Millisecond,
		Debounce: 200 * time.Millisecond, Drain: 300 * time.Millisecond, Stop: 5 * time.Second,
		HealthAddress: "127.0.0.1:0", RequireBackends: 1, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("supervisor did not stop")
		}
		if t.Failed() {
			t.Logf("supervisor log:\n%s", logs.String())
		}
	})
	ask := func(name string) string {
		cl := &dns.Client{Timeout: time.Second}
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		r, _, err := cl.Exchange(q, c.Listen)
		if err != nil {
			return "error: " + err.Error()
		}
		if len(r.Answer) != 1 {
			return dns.RcodeToString[r.Rcode]
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	waitFor("answers from a", func() bool { return ask("x.example.") == "192.0.2.1" })
	// The pid file is in the config dir (never the working directory) and
	// names the running dnsdist.
	pidFile := filepath.Join(dir, PIDFile)
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		t.Fatalf("%s: %q does not name a running process (%v)", pidFile, raw, err)
	}
	if m, _ := filepath.Glob("*.pid"); len(m) > 0 {
		t.Errorf("pid files in the working directory: %v", m)
	}

	var failures atomic.Int64
	var mu sync.Mutex
	var answers []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			got := ask(fmt.Sprintf("n%d.example.", i%64))
			if !strings.HasPrefix(got, "192.0.2.") {
				failures.Add(1)
			}
			mu.Lock()
			answers = append(answers, got)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	})
	src.set(Backend{Name: "a", Address: a}, Backend{Name: "b", Address: b})
	waitFor("b added and answering", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range answers {
			if x == "192.0.2.2" {
				return true
			}
		}
		return false
	})
	src.set(Backend{Name: "b", Address: b})
	waitFor("a removed", func() bool { return strings.Contains(logs.String(), `msg="edge: backend removed" backend=a`) })
	mu.Lock()
	mark := len(answers)
	mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d queries failed while backends changed", n)
	}
	for _, x := range answers[mark:] {
		if x != "192.0.2.2" {
			t.Fatalf("answer %s after a was removed", x)
		}
	}
	if strings.Count(logs.String(), `msg="edge: dnsdist started"`) != 1 {
		t.Errorf("dnsdist was restarted for a backend change")
	}
	t.Logf("%d queries while adding b and removing a, none failed", len(answers))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	if !strings.Contains(logs.String(), `msg="edge: stopped"`) {
		t.Error("no clean stop")
	}
	if ask("y.example.") == "192.0.2.2" {
		t.Error("dnsdist still answers after the supervisor stopped")
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file left after the stop: %v", err)
	}
}
