// Package authority compiles DNSZone and DNSRecordSet objects into an
// immutable lookup table and answers queries from it with RFC 1034 semantics
// (CNAME chains, DNAME, delegations, wildcards, negative answers).
//
// Answers that do not depend on the client (exact matches without views) come
// with their answer, authority and additional sections pre-encoded in wire
// format, so the caller can write header + question + blob without packing.
package authority

import (
	"fmt"
	"net/netip"

	"github.com/miekg/dns"
)

// Kind says what Lookup decided.
type Kind uint8

// Kinds of answers. The zero value is NotFound so an empty Answer means "not
// ours": the caller continues with blocking, cache and upstream.
const (
	NotFound Kind = iota // no zone covers the name, or the root zone has no data for it
	Answered             // positive answer (possibly a CNAME/DNAME chain)
	NoData               // name exists, type does not; SOA in authority
	NXDomain             // name does not exist; SOA in authority
	Referral             // name at or below a delegation; NS in authority, AA=0
	Refused              // zone's queryAccess does not admit the client, or a transfer type
	ServFail             // zone is not synced yet
	Forward              // name is under a forward zone: send to ForwardGroup
)

var kindNames = [...]string{"NotFound", "Answer", "NoData", "NXDomain", "Referral", "Refused", "ServFail", "Forward"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Client is who asks. InGroup reports membership in a ClientGroup named
// "namespace/name" (views) or as written in a zone's queryAccess.clientGroups;
// it is only called for zones and records that restrict access.
type Client struct {
	Addr    netip.Addr
	InGroup func(group string) bool
}

func (c Client) in(group string) bool { return c.InGroup != nil && c.InGroup(group) }

// Answer is the result of Lookup. Its slices are shared with the table and
// must not be modified: copy an RR before changing its TTL.
type Answer struct {
	Kind          Kind
	Rcode         int
	Authoritative bool
	// Sections for the slow path (pack with Reply or PackReply).
	Answer, Ns, Extra []dns.RR
	// ForwardGroup is the upstream group of a Forward answer.
	ForwardGroup string
	// Zone is the apex of the zone that answered (presentation format).
	Zone string
	// MinTTL is the smallest TTL of the answer (negative answers: the SOA's).
	MinTTL uint32
	// Wire is the pre-encoded answer+authority+additional sections, valid only
	// after a header and the client's question starting at offset 12; nil when
	// the answer depends on the question's spelling or on the client.
	Wire []byte
	// Counts are ANCOUNT, NSCOUNT, ARCOUNT of Wire.
	Counts [3]uint16

	// LookupWire leaves the Answer section of a compact set to be built
	// by Fill: set and owner are what it is built from.
	set   *rrset
	owner *node
}

// Fill builds the Answer section that LookupWire left for later (the
// dns.RR objects of a compact A or AAAA set, kept by the set once built).
// Answers of Lookup are always filled.
func (a *Answer) Fill() {
	if a.set != nil {
		a.Answer = a.set.records(a.owner)
		a.set, a.owner = nil, nil
	}
}

// Problem names one thing Compile skipped and why.
type Problem struct {
	Kind      string // "DNSZone" or "DNSRecordSet"
	Namespace string
	Name      string
	Endpoint  int // index in spec.endpoints, -1 for the whole object
	Target    int // index in targets, -1 for the whole endpoint
	// Field is the endpoint field a problem of one endpoint is about:
	// "dnsName", "recordType" or "targets" (write-time validation turns it
	// into a field path); "" for whole-object problems.
	Field  string
	Reason string
	// Code classifies a whole-object refusal (Endpoint -1) for status
	// reasons; "" for a record that did not compile.
	Code string
}

// Codes of whole-record-set refusals; status conditions use them as reasons.
const (
	CodeZoneNotFound        = "ZoneNotFound"
	CodeNamespaceNotAllowed = "NamespaceNotAllowed"
	CodeForwardZone         = "ForwardZone"
)

func (p Problem) String() string {
	s := p.Kind + " "
	if p.Namespace != "" {
		s += p.Namespace + "/"
	}
	s += p.Name
	if p.Endpoint >= 0 {
		s += fmt.Sprintf(" endpoint %d", p.Endpoint)
	}
	if p.Target >= 0 {
		s += fmt.Sprintf(" target %d", p.Target)
	}
	return s + ": " + p.Reason
}

// ZoneInfo describes one compiled zone for status reporting.
type ZoneInfo struct {
	Name         string // presentation format, with trailing dot
	Object       string // DNSZone metadata.name
	Type         string // "primary" or "forward"
	Serial       uint32
	Records      int // records served (apex SOA and NS included)
	Synced       bool
	ForwardGroup string
}
