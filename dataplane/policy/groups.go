package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
)

// MaxGroups is how many client groups one table identifies; groups beyond it
// are reported as problems and match nobody.
const MaxGroups = 512

const maskWords = MaxGroups / 64

// mask is a set of group indexes.
type mask [maskWords]uint64

func (m *mask) set(i int) { m[i/64] |= 1 << (i % 64) }
func (m *mask) or(o mask) {
	for i := range m {
		m[i] |= o[i]
	}
}
func (m *mask) has(i int) bool { return m[i/64]&(1<<(i%64)) != 0 }
func (m *mask) empty() bool    { return *m == mask{} }

// maxInterned bounds the cache of group-name slices per distinct membership.
const maxInterned = 4096

// Groups identifies clients by address, CIDR prefix, client ID and client
// name. It is immutable apart from an internal, bounded cache of the group
// slices handed out (so a query never builds one).
type Groups struct {
	names    []string // "namespace/name", index = bit
	prefixes map[netip.Prefix]mask
	lens     []int // distinct prefix lengths, IPv4 lengths as 96+len for 4in6 uniqueness
	ids      map[string]mask
	clients  map[string]mask // lower case, no trailing dot

	mu       sync.Mutex
	interned atomic.Pointer[map[mask][]string]
}

// Problem is something a compile could not apply; the rest still applies.
type Problem struct {
	Kind   string // ClientGroup, Policy
	Name   string // namespace/name
	Reason string // e.g. UnknownService, UnknownCategory, UnknownList, InvalidAddress
	Msg    string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s: %s", p.Kind, p.Name, p.Reason, p.Msg)
}

// CompileGroups builds the identification table.
func CompileGroups(groups []v1alpha1.ClientGroup) (*Groups, []Problem) {
	g := &Groups{prefixes: map[netip.Prefix]mask{}, ids: map[string]mask{}, clients: map[string]mask{}}
	var problems []Problem
	sorted := append([]v1alpha1.ClientGroup(nil), groups...)
	sort.Slice(sorted, func(i, j int) bool {
		return key(sorted[i].Namespace, sorted[i].Name) < key(sorted[j].Namespace, sorted[j].Name)
	})
	lens := map[int]bool{}
	for _, cg := range sorted {
		name := key(cg.Namespace, cg.Name)
		if len(g.names) == MaxGroups {
			problems = append(problems, Problem{"ClientGroup", name, "TooManyGroups", fmt.Sprintf("more than %d client groups", MaxGroups)})
			continue
		}
		bit := len(g.names)
		g.names = append(g.names, name)
		for _, a := range cg.Spec.Addresses {
			p, err := parseAddress(a)
			if err != nil {
				problems = append(problems, Problem{"ClientGroup", name, "InvalidAddress", err.Error()})
				continue
			}
			m := g.prefixes[p]
			m.set(bit)
			g.prefixes[p] = m
			lens[p.Bits()+lenOffset(p.Addr())] = true
		}
		for _, id := range cg.Spec.ClientIDs {
			m := g.ids[strings.ToLower(id)]
			m.set(bit)
			g.ids[strings.ToLower(id)] = m
		}
		for _, n := range cg.Spec.Names {
			k := strings.ToLower(strings.TrimSuffix(n, "."))
			m := g.clients[k]
			m.set(bit)
			g.clients[k] = m
		}
	}
	for l := range lens {
		g.lens = append(g.lens, l)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(g.lens)))
	empty := map[mask][]string{}
	g.interned.Store(&empty)
	return g, problems
}

// lenOffset keeps IPv4 and IPv6 prefix lengths apart in one list.
func lenOffset(a netip.Addr) int {
	if a.Is4() {
		return 1000
	}
	return 0
}

func parseAddress(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("address %q: %w", s, err)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits())
		if p.Addr().Is4() && p.Bits() > 32 {
			return netip.Prefix{}, fmt.Errorf("address %q: prefix too long", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("address %q: %w", s, err)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// Names lists the group names ("namespace/name") in bit order.
func (g *Groups) Names() []string { return append([]string(nil), g.names...) }

// Identify implements dataplane.Identifier: groups by address and client
// ID (the transport's, "" for none).
func (g *Groups) Identify(addr netip.Addr, clientID string) dataplane.ClientInfo {
	return g.IdentifyClient(addr, clientID, "")
}

// IdentifyClient returns the groups of a client by address, client ID (the
// first label of the DoT/DoQ server name or the DoH path segment; "" when
// the transport has none) and client name ("" when unknown). It does not
// allocate once a membership combination has been seen.
func (g *Groups) IdentifyClient(addr netip.Addr, clientID, name string) dataplane.ClientInfo {
	if g == nil || len(g.names) == 0 {
		// No groups (a node with the global policy only): nothing to
		// look up, on every query.
		return dataplane.ClientInfo{Name: name}
	}
	var m mask
	if addr.IsValid() {
		addr = addr.Unmap().WithZone("")
		off := lenOffset(addr)
		for _, l := range g.lens {
			bits := l - off
			if bits < 0 || bits > addr.BitLen() {
				continue
			}
			p, err := addr.Prefix(bits)
			if err != nil {
				continue
			}
			if pm, ok := g.prefixes[p]; ok {
				m.or(pm)
			}
		}
	}
	if clientID != "" {
		if im, ok := g.ids[clientID]; ok {
			m.or(im)
		} else if im, ok := g.ids[strings.ToLower(clientID)]; ok {
			m.or(im)
		}
	}
	if name != "" {
		if nm, ok := g.clients[trimDot(name)]; ok {
			m.or(nm)
		} else if nm, ok := g.clients[strings.ToLower(trimDot(name))]; ok {
			m.or(nm)
		}
	}
	if m.empty() {
		return dataplane.ClientInfo{Name: name}
	}
	return dataplane.ClientInfo{Name: name, Groups: g.groupsOf(m)}
}

func trimDot(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}

// groupsOf returns the shared slice of group names of m.
func (g *Groups) groupsOf(m mask) []string {
	if s, ok := (*g.interned.Load())[m]; ok {
		return s
	}
	var out []string
	for i := range g.names {
		if m.has(i) {
			out = append(out, g.names[i])
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	cur := *g.interned.Load()
	if s, ok := cur[m]; ok {
		return s
	}
	if len(cur) >= maxInterned {
		return out
	}
	next := make(map[mask][]string, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[m] = out
	g.interned.Store(&next)
	return out
}
