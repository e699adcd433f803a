package zones

import (
	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
)

// Serials is the one serial rule (authority.Serials): it lives with the
// compile step so that the zone-file export (internal/zonefile, reached by
// the API, which may not import controllers) and the controllers run the
// same code.
type Serials = authority.Serials

// Assigned is the serial given to one zone's content.
type Assigned = authority.Assigned

// ContentDigest is authority.ContentDigest.
func ContentDigest(z *v1alpha1.DNSZone, members []*v1alpha1.DNSRecordSet) string {
	return authority.ContentDigest(z, members)
}
