// Package probe asks a DNS server one question, for health checks run
// outside the data plane (svc health --dns), so that the CLI needs no DNS
// library of its own.
package probe

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"
)

// Query sends qname/qtype (a type name such as "TXT") to addr (host:port)
// over UDP, retrying over TCP when the answer is truncated, and returns the
// answer's response code name ("NOERROR", "SERVFAIL", ...).
func Query(ctx context.Context, addr, qname, qtype string, timeout time.Duration) (string, error) {
	t, ok := dns.StringToType[qtype]
	if !ok {
		return "", fmt.Errorf("probe: unknown record type %q", qtype)
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(qname), t)
	c := &dns.Client{Timeout: timeout}
	r, _, err := c.ExchangeContext(ctx, m, addr)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, addr)
	}
	if err != nil {
		return "", fmt.Errorf("probe %s %s at %s: %w", qname, qtype, addr, err)
	}
	return dns.RcodeToString[r.Rcode], nil
}
