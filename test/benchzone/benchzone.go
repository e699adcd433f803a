// Package benchzone is the auth workload of hack/bench-peers.sh for the Go
// benchmarks (test/bench and dataplane's UDP benchmarks): a zone of
// 10,000 A records compiled as a node compiles it, and the order the load
// asks its names in.
package benchzone

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
)

// Records is how many A records the zone holds: h0 to h9999.example.com.
const Records = 10_000

// Name is the owner of record i, with the trailing dot.
func Name(i int) string { return fmt.Sprintf("h%d.example.com.", i) }

// Table compiles the zone as of now.
func Table(now time.Time) (*authority.Table, error) {
	z := v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "example-com", "example.com"
	var sets []v1alpha1.DNSRecordSet
	for i := 0; i < Records; i += 1000 {
		rs := v1alpha1.DNSRecordSet{}
		rs.Namespace, rs.Name = "default", fmt.Sprintf("hosts-%d", i)
		rs.Spec.ZoneRef.Name = "example-com"
		for j := i; j < i+1000 && j < Records; j++ {
			rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{
				DNSName: fmt.Sprintf("h%d", j), RecordType: "A",
				Targets: []string{netip.AddrFrom4([4]byte{10, byte(j >> 16), byte(j >> 8), byte(j)}).String()},
			})
		}
		sets = append(sets, rs)
	}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, sets, now)
	if len(problems) > 0 {
		return nil, fmt.Errorf("zone: %v", problems[0])
	}
	return tab, nil
}

// Query returns every name once in an order drawn with a fixed seed, as
// hack/bench-peers.sh shuffles dnsperf's input.
func Query() []string {
	r := rand.New(rand.NewPCG(27, 27))
	out := make([]string, Records)
	for k, i := range r.Perm(Records) {
		out[k] = Name(i)
	}
	return out
}
