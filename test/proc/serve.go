package proc

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// What `svc serve` prints that tests wait for. One place, so a change of a
// log line breaks one parser instead of four.
var (
	apiAddrRE   = regexp.MustCompile(`listener=api address=(\S+)`)
	dnsAddrRE   = regexp.MustCompile(`msg="dns listening".*?udp/([0-9.:\[\]a-f]+:\d+)`)
	internalRE  = regexp.MustCompile(`listener=internal address=`)
	generatedRE = regexp.MustCompile(`Generated password for user "admin": (\S+)`)
)

// Server is one `svc serve` process of the built binary, started by Serve
// and stopped (SIGTERM, then a bounded wait) when the test ends.
type Server struct {
	mu       sync.Mutex
	log      strings.Builder
	api      string // host:port of the API listener
	dns      string // host:port of the first UDP DNS listener
	password string // the generated administrator password, if printed
	internal bool   // the internal listener is up (the last one opened)

	stop, kill func()
}

// API is the API listener's host:port.
func (s *Server) API() string { s.mu.Lock(); defer s.mu.Unlock(); return s.api }

// DNS is the first UDP DNS listener's host:port.
func (s *Server) DNS() string { s.mu.Lock(); defer s.mu.Unlock(); return s.dns }

// Password is the administrator password the first start generated, or "".
func (s *Server) Password() string { s.mu.Lock(); defer s.mu.Unlock(); return s.password }

// Log is everything the process printed so far.
func (s *Server) Log() string { s.mu.Lock(); defer s.mu.Unlock(); return s.log.String() }

// Stop sends SIGTERM and waits (at most 30 s, then kills); idempotent.
func (s *Server) Stop() { s.stop() }

// Kill sends SIGKILL and waits for the process to end: a crash, nothing
// written on the way out. After it Stop does nothing.
func (s *Server) Kill() { s.kill() }

// Ready conditions for ServeConfig.Ready.
var (
	// APIAndDNS: the API and a UDP DNS listener are open.
	APIAndDNS = func(s *Server) bool { return s.api != "" && s.dns != "" }
	// AllListeners: API and DNS open and the internal listener, which the
	// node opens last.
	AllListeners = func(s *Server) bool { return s.api != "" && s.dns != "" && s.internal }
	// APIAndPassword: the API is open and the first start printed the
	// generated administrator password.
	APIAndPassword = func(s *Server) bool { return s.api != "" && s.password != "" }
)

// ServeConfig says how to run `svc serve`.
type ServeConfig struct {
	Bin  string   // the svc binary (MainWithSvc builds it)
	Args []string // arguments; default: serve --config Config
	// Config is the service.yaml path (used when Args is empty).
	Config string
	Dir    string   // working directory (relative config paths resolve here)
	Env    []string // the whole environment of the process
	// Ready says when the process is ready (called with the lock held after
	// each line); default APIAndDNS.
	Ready func(*Server) bool
	// Journal, if set, gets every line the process prints.
	Journal io.Writer
	// Owner registers the stop; default the t given to Serve. A node that
	// must outlive a subtest passes the parent test.
	Owner testing.TB
}

// Serve runs svc serve and waits (at most 90 s) until c.Ready holds; the
// test fails with the process's output if it exits first or never gets
// ready. When the owning test fails, the output is logged.
func Serve(t testing.TB, c ServeConfig) *Server {
	t.Helper()
	if c.Ready == nil {
		c.Ready = APIAndDNS
	}
	if c.Owner == nil {
		c.Owner = t
	}
	args := c.Args
	if len(args) == 0 {
		args = []string{"serve", "--config", c.Config}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &Server{}
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			if c.Journal != nil {
				_, _ = io.WriteString(c.Journal, line+"\n")
			}
			if m := apiAddrRE.FindStringSubmatch(line); m != nil {
				s.api = m[1]
			}
			if m := dnsAddrRE.FindStringSubmatch(line); m != nil && s.dns == "" {
				s.dns = m[1]
			}
			if m := generatedRE.FindStringSubmatch(line); m != nil {
				s.password = m[1]
			}
			if internalRE.MatchString(line) {
				s.internal = true
			}
			if !signalled && c.Ready(s) {
				signalled = true
				close(ready)
			}
			s.mu.Unlock()
		}
	}()
	var once sync.Once
	owner := c.Owner
	s.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				owner.Errorf("svc serve did not stop within 30s of SIGTERM")
				cancel()
				<-done
			}
			_ = cmd.Wait()
			cancel()
			if owner.Failed() {
				owner.Logf("svc serve output:\n%s", s.Log())
			}
		})
	}
	s.kill = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			_ = cmd.Wait()
			cancel()
		})
	}
	owner.Cleanup(s.stop)
	select {
	case <-ready:
	case <-done:
		t.Fatalf("svc serve exited before it was ready:\n%s", s.Log())
	case <-time.After(90 * time.Second):
		t.Fatalf("svc serve was not ready within 90s:\n%s", s.Log())
	}
	return s
}

// Result is what a finished command printed and its exit code.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs bin with the environment env and standard input stdin (at most
// 60 s); a command that cannot start fails the test, a non-zero exit does
// not (callers assert on Code).
func Run(t testing.TB, env []string, stdin, bin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return Result{out.String(), errb.String(), code}
}
