package transport_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/forwardtest"
)

func packQuery(t *testing.T, name string, id uint16) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A query waiting for a slow upstream holds up no other query of the same
// connection: on DoT (pipelined) and DoH over HTTP/2 (two streams) the
// authoritative answer asked second arrives first, and the forwarded one
// follows once the upstream answers.
func TestNoHeadOfLineBlocking(t *testing.T) {
	fwd := forwardtest.New()
	st := newStack(t, stackOpts{forwarder: fwd})
	released := false
	release := func() {
		if !released {
			released = true
			close(fwd.Gate)
		}
	}
	defer release()

	t.Run("dot", func(t *testing.T) {
		conn, err := tls.Dial("tcp", st.addr("dot").String(), st.pki.ClientTLS("dot"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var req []byte
		for i, name := range []string{"slow.example.net.", "www.example.com."} {
			q := packQuery(t, name, uint16(i+1))
			req = binary.BigEndian.AppendUint16(req, uint16(len(q)))
			req = append(req, q...)
		}
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		read := func() *dns.Msg {
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			m := new(dns.Msg)
			if err := m.Unpack(readDoT(t, conn)); err != nil {
				t.Fatal(err)
			}
			return m
		}
		if m := read(); m.Id != 2 {
			t.Fatalf("first answer is for query %d, want the authoritative one (2)", m.Id)
		}
		release()
		if m := read(); m.Id != 1 || len(m.Answer) != 1 {
			t.Fatalf("forwarded answer %v", m)
		}
	})

	fwd2 := forwardtest.New()
	st2 := newStack(t, stackOpts{forwarder: fwd2})
	defer func() {
		select {
		case <-fwd2.Gate:
		default:
			close(fwd2.Gate)
		}
	}()
	t.Run("doh", func(t *testing.T) {
		c := dohClient(st2)
		url := fmt.Sprintf("https://%s/dns-query", serverName)
		slow := make(chan error, 1)
		go func() {
			resp, err := c.Post(url, "application/dns-message", bytes.NewReader(packQuery(t, "slow2.example.net.", 0)))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			slow <- err
		}()
		time.Sleep(100 * time.Millisecond) // the slow stream is open first
		t0 := time.Now()
		resp, err := c.Post(url, "application/dns-message", bytes.NewReader(packQuery(t, "www.example.com.", 0)))
		t.Logf("fast answer after %v", time.Since(t0))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s", resp.Proto)
		}
		checkAnswer(t, body)
		select {
		case err := <-slow:
			t.Fatalf("forwarded query finished before its upstream answered: %v", err)
		default:
		}
		close(fwd2.Gate)
		select {
		case err := <-slow:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("forwarded query never answered")
		}
	})
}
