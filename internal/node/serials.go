package node

import (
	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/zones"
)

// serials keeps the SOA serial of each zone growing with every change of its
// content, including removals, by the rule every compiling process shares
// (zones.Serials): the SQLite node, each data-plane pod and the operator,
// which records the serial in status.serial, assign the same serial to the
// same content.
type serials struct {
	zones.Serials
}

// assign sets spec.soa.serial on the zones (copies owned by the build) that
// leave it to the service.
func (s *serials) assign(zs []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet) {
	s.Assign(zs, sets)
}
