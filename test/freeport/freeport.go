// Package freeport finds loopback ports for programs that take a port
// number rather than port 0 (reference servers, third-party proxies the
// tests start). Imported only by tests.
package freeport

import (
	"net"
	"testing"
)

// UDPTCP returns a loopback port that was free for both UDP and TCP a
// moment ago; the program given it binds both.
func UDPTCP(t testing.TB) int {
	t.Helper()
	for range 20 {
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		l, err := net.Listen("tcp", u.LocalAddr().String())
		u.Close()
		if err == nil {
			l.Close()
			return port
		}
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return 0
}
