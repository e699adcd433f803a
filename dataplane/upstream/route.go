package upstream

import (
	"strings"

	"github.com/miekg/dns"
)

// router maps a query name to a conditional forwarding group.
type router struct {
	suffixes map[string]string // lower-case FQDN suffix -> group
}

// route returns the group of the longest suffix of qname (label-boundary,
// case-insensitive) in the table. Walking from the full name towards the
// root makes the first hit the longest one; substrings of qname are map
// keys, so a lower-case name costs no allocation.
func (r *router) route(qname string) (string, bool) {
	if len(r.suffixes) == 0 {
		return "", false
	}
	name := strings.ToLower(qname)
	if name == "" || name[len(name)-1] != '.' {
		name += "."
	}
	// Bounded: each step moves past one label, at most len(name) steps.
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		if g, ok := r.suffixes[name[off:]]; ok {
			return g, true
		}
	}
	// The root "." is the last suffix NextLabel does not yield.
	if g, ok := r.suffixes["."]; ok {
		return g, true
	}
	return "", false
}
