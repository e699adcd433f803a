package publish

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/xfr"
)

// Target is one rfc2136 sink: a primary server that accepts DNS UPDATE for
// Zone.
type Target struct {
	Name    string   // the service.io/publish label value
	Server  string   // host:port
	Zone    string   // canonical: lower case, trailing dot
	Key     *xfr.Key // nil: unsigned UPDATE
	Timeout time.Duration
}

// change replaces one RRset at the target (rrs empty: removes it).
type change struct {
	key   string
	name  string
	rtype uint16
	rrs   []dns.RR
}

// errTransport marks a failure to talk to the server at all (no answer,
// refused connection, a reply that does not verify): the rest of a pass is
// not sent.
var errTransport = errors.New("transport")

// send replaces one RRset with one UPDATE message (RFC 2136 2.5.2 delete an
// RRset, then 2.5.1 add to it), which the primary applies all or nothing.
func (t *Target) send(ctx context.Context, c change) error {
	m := new(dns.Msg)
	m.SetUpdate(t.Zone)
	m.RemoveRRset([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: c.name, Rrtype: c.rtype, Class: dns.ClassINET}}})
	if len(c.rrs) > 0 {
		m.Insert(c.rrs)
	}
	cl := &dns.Client{Net: "tcp", Timeout: t.Timeout}
	if t.Key != nil {
		m.SetTsig(t.Key.Name, t.Key.Algorithm, 300, time.Now().Unix())
		cl.TsigSecret = map[string]string{t.Key.Name: t.Key.Secret}
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	r, _, err := cl.ExchangeContext(ctx, m, t.Server)
	if r != nil && r.Rcode != dns.RcodeSuccess {
		return t.refusal(r)
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("%w: no answer from %s within %s", errTransport, t.Server, t.Timeout)
		}
		return fmt.Errorf("%w: %s: %v", errTransport, t.Server, err)
	}
	return nil
}

// refusal describes a non-NOERROR answer: the rcode, the TSIG error when the
// server names one, and what to check.
func (t *Target) refusal(r *dns.Msg) error {
	rcode := dns.RcodeToString[r.Rcode]
	tsigErr := ""
	if ts := r.IsTsig(); ts != nil && ts.Error != dns.RcodeSuccess {
		tsigErr = dns.RcodeToString[int(ts.Error)]
	}
	switch {
	case tsigErr != "" || (r.Rcode == dns.RcodeNotAuth && t.Key != nil):
		if tsigErr == "" {
			tsigErr = "refused"
		}
		return fmt.Errorf("%s: TSIG key %s refused by %s (%s): check the key's name, algorithm and secret on both sides", rcode, t.Key.Name, t.Server, tsigErr)
	case r.Rcode == dns.RcodeNotAuth:
		return fmt.Errorf("%s: %s is not authoritative for %s or wants a TSIG key (publish.targets tsigKey)", rcode, t.Server, t.Zone)
	case r.Rcode == dns.RcodeRefused:
		return fmt.Errorf("%s: %s refused the UPDATE for %s (its update ACL)", rcode, t.Server, t.Zone)
	case r.Rcode == dns.RcodeNotZone:
		return fmt.Errorf("%s: the name is not in zone %s at %s", rcode, t.Zone, t.Server)
	}
	return fmt.Errorf("%s: UPDATE for %s refused by %s", rcode, t.Zone, t.Server)
}
