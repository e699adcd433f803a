package node

import (
	"sort"
	"strconv"
	"strings"

	"github.com/svcdns/svc/api/v1alpha1"
)

// serials keeps the SOA serial of each zone growing with every change of its
// content, including removals: a serial derived from resource versions alone
// could fall when the record set holding the highest version is deleted, and
// secondaries would then miss the change.
type serials struct {
	last map[string]servedSerial // zone object name
}

type servedSerial struct {
	fingerprint string
	serial      uint32
}

// assign sets spec.soa.serial on the zones (copies owned by the build) that
// leave it to the service.
func (s *serials) assign(zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet) {
	if s.last == nil {
		s.last = map[string]servedSerial{}
	}
	byZone := map[string][]string{}
	maxRV := map[string]uint64{}
	for i := range sets {
		rs := &sets[i]
		z := rs.Spec.ZoneRef.Name
		byZone[z] = append(byZone[z], rs.Namespace+"/"+rs.Name+"/"+string(rs.UID)+"@"+strconv.FormatInt(rs.Generation, 10))
		if n, err := strconv.ParseUint(rs.ResourceVersion, 10, 64); err == nil && n > maxRV[z] {
			maxRV[z] = n
		}
	}
	seen := map[string]bool{}
	for i := range zones {
		z := &zones[i]
		seen[z.Name] = true
		if z.Spec.SOA != nil && z.Spec.SOA.Serial != 0 {
			continue // set by the user
		}
		members := byZone[z.Name]
		sort.Strings(members)
		fp := string(z.UID) + "@" + strconv.FormatInt(z.Generation, 10) + "|" + strings.Join(members, ",")
		derived := maxRV[z.Name]
		if n, err := strconv.ParseUint(z.ResourceVersion, 10, 64); err == nil && n > derived {
			derived = n
		}
		serial := uint32(max(derived, 1))
		if prev, ok := s.last[z.Name]; ok {
			switch {
			case prev.fingerprint == fp:
				serial = prev.serial
			case serial <= prev.serial:
				serial = prev.serial + 1
			}
		}
		s.last[z.Name] = servedSerial{fingerprint: fp, serial: serial}
		if z.Spec.SOA == nil {
			z.Spec.SOA = &v1alpha1.SOA{}
		} else {
			soa := *z.Spec.SOA
			z.Spec.SOA = &soa
		}
		z.Spec.SOA.Serial = int64(serial)
	}
	for name := range s.last {
		if !seen[name] {
			delete(s.last, name)
		}
	}
}
