package edge

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/crypto/nacl/secretbox"
)

// Console speaks dnsdist's control socket protocol (the one `dnsdist -c`
// uses): both sides exchange a 24-byte nonce, then every message is a
// 4-byte big-endian length and a libsodium secretbox sealed with the
// shared key and a nonce whose first 4 bytes count the messages.
type Console struct {
	Address string
	Key     [32]byte
	Timeout time.Duration
}

type nonce [24]byte

// merge takes the first half from lower and the second half from higher,
// as dnsdist's SodiumNonce::merge does.
func merge(lower, higher nonce) nonce {
	var n nonce
	copy(n[:12], lower[:12])
	copy(n[12:], higher[12:])
	return n
}

func (n *nonce) increment() {
	binary.BigEndian.PutUint32(n[:4], binary.BigEndian.Uint32(n[:4])+1)
}

// Run sends one Lua statement and returns what dnsdist printed. An error
// raised by the statement comes back as text, which Run turns into an
// error when it starts with dnsdist's error markers.
func (c *Console) Run(ctx context.Context, cmd string) (string, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", c.Address)
	if err != nil {
		return "", fmt.Errorf("dnsdist console %s: %w", c.Address, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var ours, theirs nonce
	if _, err := rand.Read(ours[:]); err != nil {
		return "", err
	}
	if _, err := conn.Write(ours[:]); err != nil {
		return "", fmt.Errorf("dnsdist console: send nonce: %w", err)
	}
	if _, err := io.ReadFull(conn, theirs[:]); err != nil {
		return "", fmt.Errorf("dnsdist console %s: read nonce (wrong address or console not enabled): %w", c.Address, err)
	}
	reading, writing := merge(ours, theirs), merge(theirs, ours)
	msg := secretbox.Seal(nil, []byte(cmd), (*[24]byte)(&writing), &c.Key)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(msg)))
	if _, err := conn.Write(append(hdr[:], msg...)); err != nil {
		return "", fmt.Errorf("dnsdist console: send: %w", err)
	}
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return "", fmt.Errorf("dnsdist console: read reply (wrong key?): %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 16<<20 {
		return "", fmt.Errorf("dnsdist console: reply of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return "", fmt.Errorf("dnsdist console: read reply: %w", err)
	}
	out, ok := secretbox.Open(nil, body, (*[24]byte)(&reading), &c.Key)
	if !ok {
		return "", errors.New("dnsdist console: reply does not decrypt: the console key differs")
	}
	s := string(out)
	if isConsoleError(s) {
		return s, fmt.Errorf("dnsdist console: %s", s)
	}
	return s, nil
}

func isConsoleError(s string) bool {
	for _, p := range []string{"Error: ", "[string \"", "Caught exception"} {
		if len(s) >= len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}
