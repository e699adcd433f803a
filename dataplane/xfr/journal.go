package xfr

import (
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/authority"
)

// Journal bounds: a zone keeps its last DefaultJournalChanges changes, and
// at most DefaultJournalBytes of them (records counted at their
// presentation-format length); the oldest go first. A secondary further
// behind gets the whole zone (AXFR-style IXFR answer).
const (
	DefaultJournalChanges = 100
	DefaultJournalBytes   = 8 << 20
)

// Change is the difference between two served versions of a zone.
type Change struct {
	From, To       *dns.SOA // the SOA before and after
	Deleted, Added []dns.RR // records other than the SOA
	size           int
}

// Journal keeps the recent changes of every primary zone, computed from
// the tables the node serves one after another (IXFR, RFC 1995). It is
// safe for concurrent use.
type Journal struct {
	maxChanges int
	maxBytes   int

	mu    sync.Mutex
	zones map[string]*zoneJournal // by zone name (presentation, lower case)
}

type zoneJournal struct {
	last    authority.TransferZone // the content the newest change leads to
	changes []Change               // oldest first; changes[i].To.Serial == changes[i+1].From.Serial
	bytes   int
}

// NewJournal returns an empty journal; bounds <= 0 take the defaults.
func NewJournal(maxChanges, maxBytes int) *Journal {
	if maxChanges <= 0 {
		maxChanges = DefaultJournalChanges
	}
	if maxBytes <= 0 {
		maxBytes = DefaultJournalBytes
	}
	return &Journal{maxChanges: maxChanges, maxBytes: maxBytes, zones: map[string]*zoneJournal{}}
}

// Served is a zone whose served content changed (or appeared) in a table.
type Served struct {
	Zone      string
	Object    string
	Serial    uint32
	New       bool // first seen (the node started or the zone was created)
	Regressed bool // the serial did not grow (RFC 1982) though content changed
	TZ        authority.TransferZone
}

// Observe records the primary zones of t, the table now served: each zone
// whose content differs from the one observed before gets a Change. It
// returns the zones that changed, for NOTIFY. Zones no longer in t are
// forgotten.
func (j *Journal) Observe(t *authority.Table) []Served {
	if t == nil {
		return nil
	}
	zones := t.TransferZones()
	var out []Served
	seen := make(map[string]bool, len(zones))
	for _, tz := range zones {
		name := tz.Name()
		seen[name] = true
		if !tz.Synced() {
			continue // answering SERVFAIL for now: keep the journal as it was
		}
		j.mu.Lock()
		zj := j.zones[name]
		var prev authority.TransferZone
		if zj != nil {
			prev = zj.last
		}
		j.mu.Unlock()
		if zj != nil && prev.SameContent(tz) {
			continue
		}
		s := Served{Zone: name, Object: tz.Object(), Serial: tz.Serial(), New: zj == nil, TZ: tz}
		if zj == nil {
			j.mu.Lock()
			j.zones[name] = &zoneJournal{last: tz}
			j.mu.Unlock()
			out = append(out, s)
			continue
		}
		from, to := prev.SOA(), tz.SOA()
		if !serialLess(from.Serial, to.Serial) {
			// A change without a greater serial cannot be told apart by a
			// secondary: start over (IXFR falls back to the whole zone).
			s.Regressed = from.Serial != to.Serial || !sameSOA(from, to)
			j.mu.Lock()
			j.zones[name] = &zoneJournal{last: tz}
			j.mu.Unlock()
			if from.Serial != to.Serial || s.Regressed {
				out = append(out, s)
			}
			continue
		}
		del, add := Diff(records(prev), records(tz))
		j.Add(name, tz, Change{From: from, To: to, Deleted: del, Added: add})
		out = append(out, s)
	}
	j.mu.Lock()
	for name := range j.zones {
		if !seen[name] {
			delete(j.zones, name)
		}
	}
	j.mu.Unlock()
	return out
}

func sameSOA(a, b *dns.SOA) bool { return dns.IsDuplicate(a, b) && a.Hdr.Ttl == b.Hdr.Ttl }

// Add appends a change to zone's journal, whose content is now last, and
// drops the oldest changes beyond the bounds. A change that does not
// continue the journal (its From serial is not the newest To) replaces it.
func (j *Journal) Add(zone string, last authority.TransferZone, c Change) {
	c.size = changeSize(c)
	j.mu.Lock()
	defer j.mu.Unlock()
	zj := j.zones[zone]
	if zj == nil {
		zj = &zoneJournal{}
		j.zones[zone] = zj
	}
	if n := len(zj.changes); n > 0 && zj.changes[n-1].To.Serial != c.From.Serial {
		zj.changes, zj.bytes = nil, 0
	}
	zj.last = last
	if c.size > j.maxBytes {
		zj.changes, zj.bytes = nil, 0 // one change larger than the journal: AXFR only
		return
	}
	zj.changes = append(zj.changes, c)
	zj.bytes += c.size
	drop := 0
	for len(zj.changes)-drop > j.maxChanges || zj.bytes > j.maxBytes {
		zj.bytes -= zj.changes[drop].size
		drop++
	}
	if drop > 0 {
		zj.changes = append([]Change(nil), zj.changes[drop:]...)
	}
}

// Since returns the changes that lead from serial from to the content of
// current, oldest first; ok is false when the journal does not reach back
// to from or does not end at current (the caller sends the whole zone).
func (j *Journal) Since(current authority.TransferZone, from uint32) (changes []Change, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	zj := j.zones[current.Name()]
	if zj == nil || len(zj.changes) == 0 || !zj.last.SameContent(current) {
		return nil, false
	}
	if zj.changes[len(zj.changes)-1].To.Serial != current.Serial() {
		return nil, false
	}
	for i, c := range zj.changes {
		if c.From.Serial == from {
			return zj.changes[i:], true // immutable once added: safe to share
		}
	}
	return nil, false
}

// Len reports the changes and bytes kept for zone.
func (j *Journal) Len(zone string) (changes, bytes int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if zj := j.zones[zone]; zj != nil {
		return len(zj.changes), zj.bytes
	}
	return 0, 0
}

func records(tz authority.TransferZone) []dns.RR {
	out := make([]dns.RR, 0, tz.Records())
	tz.Each(func(rr dns.RR) bool {
		out = append(out, rr)
		return true
	})
	return out
}

// Diff returns the records of old missing from cur and those of cur
// missing from old. A record whose TTL changed is deleted and added, as
// IXFR carries it. Duplicates count once.
func Diff(old, cur []dns.RR) (deleted, added []dns.RR) {
	have := make(map[string]struct{}, len(old))
	for _, rr := range old {
		have[rrKey(rr)] = struct{}{}
	}
	now := make(map[string]struct{}, len(cur))
	for _, rr := range cur {
		k := rrKey(rr)
		if _, dup := now[k]; dup {
			continue
		}
		now[k] = struct{}{}
		if _, ok := have[k]; !ok {
			added = append(added, rr)
		}
	}
	for _, rr := range old {
		k := rrKey(rr)
		if _, ok := now[k]; !ok {
			deleted = append(deleted, rr)
			now[k] = struct{}{} // duplicates in old count once
		}
	}
	// a stable order: the same change reads the same on every node
	byKey := func(a, b dns.RR) int { return strings.Compare(rrKey(a), rrKey(b)) }
	slices.SortFunc(deleted, byKey)
	slices.SortFunc(added, byKey)
	return deleted, added
}

// rrKey identifies a record by its canonical text (owner lower-cased).
func rrKey(rr dns.RR) string {
	h := rr.Header()
	owner := dns.CanonicalName(h.Name)
	if owner == h.Name {
		return rr.String()
	}
	cp := dns.Copy(rr)
	cp.Header().Name = owner
	return cp.String()
}

func changeSize(c Change) int {
	n := 2 * 64
	for _, rr := range c.Deleted {
		n += len(rr.String())
	}
	for _, rr := range c.Added {
		n += len(rr.String())
	}
	return n
}

// serialLess is RFC 1982 serial number arithmetic: a < b.
func serialLess(a, b uint32) bool {
	return a != b && ((a < b && b-a < 1<<31) || (a > b && a-b > 1<<31))
}
