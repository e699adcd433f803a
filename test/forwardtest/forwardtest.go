// Package forwardtest holds a data-plane Forwarder for tests that need an
// upstream answer to wait: Gated answers only once its gate is closed.
// Imported only by tests.
package forwardtest

import (
	"context"
	"net/netip"

	"github.com/miekg/dns"
)

// Answer is the address Gated puts in every answer.
var Answer = netip.MustParseAddr("198.51.100.7")

// Gated answers every query with an A record for Answer (TTL 60, upstream
// 192.0.2.53:53) once Gate is closed, or fails when the query's context
// ends first.
type Gated struct{ Gate chan struct{} }

// New returns a Gated forwarder with an open (unclosed) gate.
func New() *Gated { return &Gated{Gate: make(chan struct{})} }

func (f *Gated) Forward(ctx context.Context, _ string, req *dns.Msg, _ netip.Addr) (*dns.Msg, string, error) {
	select {
	case <-f.Gate:
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A: Answer.AsSlice()}}
	return m, "192.0.2.53:53", nil
}
