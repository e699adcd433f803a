// Package benchchild runs the server side of a load harness (make bench's
// test/bench and test/flood) as a child process: the child prints its
// address on one line of stdout and stops when its stdin closes, so the
// load generator and the server never share a Go runtime.
package benchchild

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Child is one server process.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// Addr is the address the child printed.
	Addr string
}

// Start runs argv with env (nil: this process's), stderr passed through,
// and waits for the address line.
func Start(argv, env []string) (*Child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%v: no address: %w", argv, err)
	}
	return &Child{cmd: cmd, stdin: stdin, Addr: strings.TrimSpace(line)}, nil
}

// Pid is the child's process ID (for /proc figures).
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Stop closes the child's stdin and waits up to grace before killing it.
// It may be called more than once.
func (c *Child) Stop(grace time.Duration) {
	if c.stdin == nil {
		return
	}
	_ = c.stdin.Close()
	c.stdin = nil
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
