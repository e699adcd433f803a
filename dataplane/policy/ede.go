package policy

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/catalogue"
)

// EDECode is the Extended DNS Error (RFC 8914) info code of a block: 15
// Blocked for a block list's rule, 17 Filtered for a policy's own decision
// (blocked service or category, allowOnly).
func EDECode(d dataplane.Decision) uint16 {
	if d.List == "" || strings.HasPrefix(d.List, catalogue.ListPrefix) {
		return dns.ExtendedErrorCodeFiltered
	}
	return dns.ExtendedErrorCodeBlocked
}

// EDEText is the extra text of a block's Extended DNS Error, e.g.
// "policy default/kids list default/ads rule ||ads.example^". It allocates;
// the pipeline builds it only for blocked answers.
func EDEText(d dataplane.Decision) string {
	var b strings.Builder
	add := func(k, v string) {
		if v == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte(' ')
		b.WriteString(v)
	}
	add("policy", d.Policy)
	add("list", d.List)
	add("rule", d.RuleText())
	if d.List == "" && d.Verdict == dataplane.VerdictBlock {
		add("reason", "allowOnly")
	}
	return b.String()
}

// EDE returns the option the blocking stage should add to a blocked answer
// when the client sent EDNS.
func EDE(d dataplane.Decision) *dns.EDNS0_EDE {
	return &dns.EDNS0_EDE{InfoCode: EDECode(d), ExtraText: EDEText(d)}
}
