package authority

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/svcdns/svc/api/v1alpha1"
)

// Serials assigns the SOA serial of each zone that leaves it to the service.
// Every process that compiles zones (the SQLite node, each data-plane pod, the
// operator) runs the same rule on the same objects, so they agree:
//
//   - unchanged content (ContentDigest equal to status.serialDigest) keeps
//     status.serial, the serial the status writer recorded (a process that
//     picked a smaller one before the status arrived takes it over);
//   - changed content gets max(status.serial+1, the largest resourceVersion of
//     the zone's record sets), and on a zone never given a serial also the
//     zone's own resourceVersion;
//   - within one process a serial never falls, even before the status writer
//     caught up (removals raise it by one);
//   - a serial the user set (spec.soa.serial, e.g. from an imported zone
//     file) is a floor, not a fixed value: the zone is first served with it,
//     and afterwards with max(user serial, the serial the rules above give)
//     in RFC 1982 arithmetic, so every change still raises the served serial
//     and secondaries pull it. Raising spec.soa.serial moves the zone up to
//     it; lowering it is ignored (serials never fall).
//
// The zone's own resourceVersion is left out once a serial was recorded,
// because status writes move it without changing content, and two processes
// could see different versions of it.
type Serials struct {
	mu   sync.Mutex
	last map[string]Assigned // by zone object name
}

// Assigned is the serial given to one zone's content.
type Assigned struct {
	Serial uint32
	Digest string
}

// Assign sets spec.soa.serial on the zones (copies owned by the caller) to
// the serial each is served with, and returns what each zone got.
func (s *Serials) Assign(zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet) map[string]Assigned {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]Assigned{}
	}
	byZone := map[string][]*v1alpha1.DNSRecordSet{}
	for i := range sets {
		byZone[sets[i].Spec.ZoneRef.Name] = append(byZone[sets[i].Spec.ZoneRef.Name], &sets[i])
	}
	out := make(map[string]Assigned, len(zones))
	seen := map[string]bool{}
	for i := range zones {
		z := &zones[i]
		seen[z.Name] = true
		members := byZone[z.Name]
		digest := ContentDigest(z, members)
		a := assign(z, members, digest, s.last[z.Name])
		if z.Spec.SOA != nil && z.Spec.SOA.Serial != 0 {
			a = floor(a, uint32(z.Spec.SOA.Serial), z, s.last[z.Name])
		}
		s.last[z.Name] = a
		out[z.Name] = a
		if z.Spec.SOA == nil {
			z.Spec.SOA = &v1alpha1.SOA{}
		} else {
			soa := *z.Spec.SOA
			z.Spec.SOA = &soa
		}
		z.Spec.SOA.Serial = int64(a.Serial)
	}
	for name := range s.last {
		if !seen[name] {
			delete(s.last, name)
		}
	}
	return out
}

func assign(z *v1alpha1.DNSZone, members []*v1alpha1.DNSRecordSet, digest string, prev Assigned) Assigned {
	recorded := uint64(max(z.Status.Serial, 0))
	// The recorded serial of this content wins, also over the one this
	// process picked before the status writer caught up (which may have seen
	// fewer resourceVersions), unless that would lower what it served.
	if z.Status.SerialDigest == digest && recorded > 0 && !serialLess(uint32(recorded), prev.Serial) {
		return Assigned{Serial: uint32(recorded), Digest: digest}
	}
	if prev.Digest == digest && prev.Serial != 0 {
		return prev
	}
	derived := uint64(0)
	if recorded > 0 {
		derived = recorded + 1
	} else if n, err := strconv.ParseUint(z.ResourceVersion, 10, 64); err == nil {
		derived = n
	}
	for _, rs := range members {
		if n, err := strconv.ParseUint(rs.ResourceVersion, 10, 64); err == nil && n > derived {
			derived = n
		}
	}
	serial := nonZero(uint32(derived))
	if prev.Serial != 0 && !serialLess(prev.Serial, serial) {
		serial = nonZero(prev.Serial + 1)
	}
	return Assigned{Serial: serial, Digest: digest}
}

// floor applies the user's serial: a zone never served before (no serial
// recorded, none picked by this process) gets it as it is; later the
// greater of it and the assigned one (RFC 1982), so a change served after
// an import still raises the serial.
func floor(a Assigned, user uint32, z *v1alpha1.DNSZone, prev Assigned) Assigned {
	if (z.Status.Serial <= 0 && prev.Serial == 0) || serialLess(a.Serial, user) {
		a.Serial = user
	}
	return a
}

// serialLess is RFC 1982 serial number arithmetic (3.2): a < b.
func serialLess(a, b uint32) bool {
	return a != b && (a < b && b-a < 1<<31 || a > b && a-b > 1<<31)
}

// nonZero skips serial 0 when a serial wraps: 0 means "not assigned" here.
func nonZero(s uint32) uint32 {
	if s == 0 {
		return 1
	}
	return s
}

// ContentDigest identifies what a zone serves: the zone's UID and generation
// and its record sets' identities and generations (a generation grows with
// every spec change; status writes leave it alone).
func ContentDigest(z *v1alpha1.DNSZone, members []*v1alpha1.DNSRecordSet) string {
	keys := make([]string, 0, len(members))
	for _, rs := range members {
		keys = append(keys, rs.Namespace+"/"+rs.Name+"/"+string(rs.UID)+"@"+strconv.FormatInt(rs.Generation, 10))
	}
	sort.Strings(keys)
	sum := sha256.Sum256([]byte(string(z.UID) + "@" + strconv.FormatInt(z.Generation, 10) + "|" + strings.Join(keys, ",")))
	return hex.EncodeToString(sum[:12])
}
