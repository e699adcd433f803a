package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Supervised is a long-running program a test started: a supervisor such
// as svc edge run or svc vip run. Its output is kept (Log); when the test
// ends it gets SIGTERM and is expected to exit within 20 s (else the test
// fails and it is killed), and its output is logged if the test failed.
type Supervised struct {
	Process
	cmd  *exec.Cmd
	done chan struct{}
}

// StartSupervised runs bin with args and the environment env (nil: this
// process's); name says what it is in the messages when it is stopped.
func StartSupervised(t testing.TB, name string, env []string, bin string, args ...string) *Supervised {
	t.Helper()
	s := &Supervised{done: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s, s
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not stop within 20s of SIGTERM", name)
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, s.Log())
		}
	})
	return s
}
