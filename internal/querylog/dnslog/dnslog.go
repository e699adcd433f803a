// Package dnslog connects the data plane to the query log: Logger
// implements dataplane.QueryLogger and hands each record, converted to a
// querylog.Row, to a querylog.Writer without blocking. It is the only
// query-log package that imports dataplane, so the REST API can use
// package querylog without reaching the data plane.
package dnslog

import (
	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/internal/querylog"
)

// Sink receives rows; *querylog.Writer implements it.
type Sink interface {
	Enqueue(r querylog.Row) bool
}

// Logger is a dataplane.QueryLogger.
type Logger struct{ sink Sink }

var _ dataplane.QueryLogger = (*Logger)(nil)

// New returns a Logger writing to sink.
func New(sink Sink) *Logger { return &Logger{sink: sink} }

// Log converts the record and enqueues it; it never blocks.
func (l *Logger) Log(rec dataplane.QueryRecord) {
	l.sink.Enqueue(Convert(&rec))
}

// Convert turns a data-plane record into a row.
func Convert(rec *dataplane.QueryRecord) querylog.Row {
	r := querylog.Row{
		Time: rec.Time, Node: rec.Node, ClientName: rec.ClientName,
		Domain: querylog.NormalizeDomain(rec.Name()), QType: qtype(rec.Type), Rcode: rcode(rec.Rcode),
		Status: rec.Status.String(), Reason: rec.Reason.String(),
		List: rec.List, Rule: rec.Rule, Policy: rec.Policy, Upstream: rec.Upstream, Zone: rec.Zone,
		Transport: rec.Transport.String(), Duration: rec.Duration,
	}
	if rec.Client.IsValid() {
		r.Client = rec.Client.Addr().Unmap().String()
	}
	if len(rec.Groups) > 0 {
		r.Group = rec.Groups[0]
	}
	return r
}

func qtype(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + itoa(int(t))
}

func rcode(c int) string {
	if s, ok := dns.RcodeToString[c]; ok {
		return s
	}
	return "RCODE" + itoa(c)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
