//go:build linux

package api

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// peerCredentials reads SO_PEERCRED of a Unix socket connection: the
// credentials the peer process had when it connected.
func peerCredentials(c net.Conn) (peerCred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peerCred{}, errors.New("not a Unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peerCred{}, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return peerCred{}, err
	}
	if serr != nil {
		return peerCred{}, serr
	}
	return peerCred{PID: cred.Pid, UID: int(cred.Uid), GID: int(cred.Gid), Known: true}, nil
}

// procGroups returns the supplementary groups of a process from
// /proc/<pid>/status (at most 64 KiB read). SO_PEERCRED carries only the
// primary group, while members of the socket's group usually hold it as a
// supplementary one.
func procGroups(pid int32) []int {
	if pid <= 0 {
		return nil
	}
	f, err := os.Open("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var out []int
		for _, f := range strings.Fields(rest) {
			if g, err := strconv.Atoi(f); err == nil {
				out = append(out, g)
			}
		}
		return out
	}
	return nil
}
