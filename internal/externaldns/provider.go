package externaldns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/store"
)

// Manager is the manager of every record set the provider writes; the API,
// the CLI and GitOps refuse to change those (managed_by).
const Manager store.Manager = "integration:external-dns"

// Options configure a Provider.
type Options struct {
	Store store.Store
	// Namespace holds the record sets the provider writes and reads.
	Namespace string
	// Zones restricts the provider to these zones and the zones below them
	// (the domain filter external-dns gets); empty: every primary zone but
	// the root zone.
	Zones  []string
	Logger *slog.Logger
}

// Provider implements the webhook operations over the store.
type Provider struct {
	st     store.Store
	ns     string
	zones  []string // canonical
	logger *slog.Logger
	// mu makes each ApplyChanges read-modify-write its record sets alone;
	// one provider process writes at a time, the store's versions catch
	// anyone else.
	mu sync.Mutex
}

// New returns a provider; Zones must be domain names.
func New(o Options) (*Provider, error) {
	if o.Store == nil {
		return nil, errors.New("externaldns: no store")
	}
	if o.Namespace == "" {
		return nil, errors.New("externaldns: no namespace")
	}
	p := &Provider{st: o.Store, ns: o.Namespace, logger: o.Logger}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	for _, z := range o.Zones {
		c := canonName(z)
		if c == "" || strings.Contains(c, "..") || strings.ContainsAny(c, " \t") {
			return nil, fmt.Errorf("externaldns: zone %q is not a domain name", z)
		}
		p.zones = append(p.zones, c)
	}
	sort.Strings(p.zones)
	return p, nil
}

// DomainFilter is the negotiation answer: the configured zones, or no filter.
func (p *Provider) DomainFilter() DomainFilter {
	return DomainFilter{Include: slices.Clone(p.zones)}
}

// zoneInfo is one primary zone the provider may write into.
type zoneInfo struct {
	name string // canonical zone name
	obj  *v1alpha1.DNSZone
}

// servedZones lists the primary zones within the filter, by canonical name.
func (p *Provider) servedZones(ctx context.Context) (map[string]zoneInfo, []string, error) {
	res, err := p.st.List(ctx, store.ListOptions{Kind: store.KindDNSZone})
	if err != nil {
		return nil, nil, fmt.Errorf("list zones: %w", err)
	}
	out := map[string]zoneInfo{}
	var names []string
	for _, u := range res.Items {
		var z v1alpha1.DNSZone
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &z); err != nil {
			continue
		}
		if z.Spec.Type != "" && z.Spec.Type != "primary" {
			continue
		}
		if !z.Spec.RecordSetNamespaces.Allows(p.ns) {
			// the zone would not serve the provider's record sets
			continue
		}
		name := z.Spec.ZoneName
		if name == "" {
			name = z.Name
		}
		name = canonName(name)
		if name == "" || (len(p.zones) > 0 && zoneOf(p.zones, name) == "") {
			continue
		}
		out[name] = zoneInfo{name: name, obj: &z}
		names = append(names, name)
	}
	return out, names, nil
}

// owned lists the record sets the provider wrote, by object name.
func (p *Provider) owned(ctx context.Context) (map[string]*v1alpha1.DNSRecordSet, error) {
	res, err := p.st.List(ctx, store.ListOptions{Kind: store.KindDNSRecordSet, Namespace: p.ns})
	if err != nil {
		return nil, fmt.Errorf("list record sets in %s: %w", p.ns, err)
	}
	out := map[string]*v1alpha1.DNSRecordSet{}
	for _, u := range res.Items {
		// Records of other managers are never returned nor touched.
		if store.OwnerOf(u) != Manager {
			continue
		}
		var rs v1alpha1.DNSRecordSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rs); err != nil {
			return nil, fmt.Errorf("record set %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out[rs.Name] = &rs
	}
	return out, nil
}

// Records returns every endpoint the provider wrote in the filtered zones,
// exactly as written, in a stable order.
func (p *Provider) Records(ctx context.Context) ([]*Endpoint, error) {
	zones, _, err := p.servedZones(ctx)
	if err != nil {
		return nil, err
	}
	sets, err := p.owned(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []*Endpoint{}
	for _, n := range names {
		rs := sets[n]
		if _, ok := zones[canonName(rs.Spec.ZoneRef.Name)]; !ok {
			if _, ok := zoneByObject(zones, rs.Spec.ZoneRef.Name); !ok {
				continue
			}
		}
		for i := range rs.Spec.Endpoints {
			out = append(out, fromRecord(&rs.Spec.Endpoints[i]))
		}
	}
	return out, nil
}

func zoneByObject(zones map[string]zoneInfo, objName string) (zoneInfo, bool) {
	for _, z := range zones {
		if z.obj.Name == objName {
			return z, true
		}
	}
	return zoneInfo{}, false
}

// Refusal is a change the provider will not make (HTTP 400 or 422): retrying
// does not help.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// check finds the problems the compile step would report for ep in zone.
func (p *Provider) check(z zoneInfo, ep *Endpoint) []string {
	rs := &v1alpha1.DNSRecordSet{Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: z.obj.Name}, Endpoints: []v1alpha1.Endpoint{toRecord(ep)}}}
	rs.Namespace = p.ns
	var out []string
	for _, pr := range authority.CheckRecordSet(rs, z.obj) {
		out = append(out, pr.Reason)
	}
	return out
}

// AdjustEndpoints drops the endpoints the provider would refuse: names in
// no zone it serves and record data the zone cannot serve, each logged. The
// rest come back unchanged: records are stored exactly as written, so there
// is nothing to normalise and external-dns's plan reaches a fixed point.
func (p *Provider) AdjustEndpoints(ctx context.Context, eps []*Endpoint) ([]*Endpoint, error) {
	zones, names, err := p.servedZones(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Endpoint, 0, len(eps))
	for _, ep := range eps {
		z := zoneOf(names, ep.DNSName)
		if z == "" {
			p.logger.Warn("external-dns endpoint outside the served zones, ignored", "name", ep.DNSName, "type", ep.RecordType, "zones", names)
			continue
		}
		if probs := p.check(zones[z], ep); len(probs) > 0 {
			p.logger.Warn("external-dns endpoint the zone cannot serve, ignored", "name", ep.DNSName, "type", ep.RecordType, "problems", strings.Join(probs, "; "))
			continue
		}
		out = append(out, ep)
	}
	return out, nil
}

// ApplyChanges writes one plan in one store transaction: deletions and old
// versions are removed, creations and new versions added, record sets left
// empty are deleted. A change outside the served zones is skipped (logged);
// record data the zone cannot serve refuses the whole plan (*Refusal).
func (p *Provider) ApplyChanges(ctx context.Context, ch *Changes) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	zones, names, err := p.servedZones(ctx)
	if err != nil {
		return err
	}
	sets, err := p.owned(ctx)
	if err != nil {
		return err
	}
	touched := map[string]bool{}
	// A name in no served zone is skipped and logged, as external-dns's
	// own providers do: its txt registry names the ownership record of an
	// apex record "<type>-<zone>", outside the zone, unless --txt-prefix
	// puts it inside (docs/external-dns.md), and refusing the plan would
	// stop external-dns altogether.
	skipped := 0
	place := func(ep *Endpoint) (string, zoneInfo, bool) {
		z := zoneOf(names, ep.DNSName)
		if z == "" {
			skipped++
			p.logger.Warn("external-dns change outside the served zones, skipped", "name", ep.DNSName, "type", ep.RecordType, "zones", names)
			return "", zoneInfo{}, false
		}
		return objectName(z, ep.DNSName), zones[z], true
	}
	// remove looks in every record set of the provider, not only where the
	// record would go now: a subzone created since moves new records of a
	// name elsewhere, and the old ones must still be deletable.
	remove := func(ep *Endpoint) error {
		if _, _, ok := place(ep); !ok {
			return nil
		}
		k := keyOf(ep.DNSName, ep.RecordType, ep.SetIdentifier)
		found := false
		for name, rs := range sets {
			n := len(rs.Spec.Endpoints)
			rs.Spec.Endpoints = slices.DeleteFunc(rs.Spec.Endpoints, func(e v1alpha1.Endpoint) bool {
				return keyOf(e.DNSName, e.RecordType, e.SetIdentifier) == k
			})
			if len(rs.Spec.Endpoints) != n {
				touched[name], found = true, true
			}
		}
		if !found {
			p.logger.Info("external-dns deletes a record that is not there", "name", ep.DNSName, "type", ep.RecordType)
		}
		return nil
	}
	add := func(ep *Endpoint) error {
		name, z, ok := place(ep)
		if !ok {
			return nil
		}
		if probs := p.check(z, ep); len(probs) > 0 {
			return &Refusal{fmt.Sprintf("%s %s: %s", ep.DNSName, ep.RecordType, strings.Join(probs, "; "))}
		}
		rs := sets[name]
		if rs == nil {
			rs = &v1alpha1.DNSRecordSet{Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: z.obj.Name}}}
			rs.Name, rs.Namespace = name, p.ns
			sets[name] = rs
		}
		rec := toRecord(ep)
		k := keyOf(ep.DNSName, ep.RecordType, ep.SetIdentifier)
		if i := slices.IndexFunc(rs.Spec.Endpoints, func(e v1alpha1.Endpoint) bool {
			return keyOf(e.DNSName, e.RecordType, e.SetIdentifier) == k
		}); i >= 0 {
			rs.Spec.Endpoints[i] = rec
		} else {
			rs.Spec.Endpoints = append(rs.Spec.Endpoints, rec)
		}
		touched[name] = true
		return nil
	}
	for _, l := range [][]*Endpoint{ch.Delete, ch.UpdateOld} {
		for _, ep := range l {
			if err := remove(ep); err != nil {
				return err
			}
		}
	}
	for _, l := range [][]*Endpoint{ch.Create, ch.UpdateNew} {
		for _, ep := range l {
			if err := add(ep); err != nil {
				return err
			}
		}
	}
	if len(touched) == 0 {
		return nil
	}
	var objs []*unstructured.Unstructured
	var dels []store.Key
	for _, name := range slices.Sorted(maps.Keys(touched)) {
		rs := sets[name]
		if len(rs.Spec.Endpoints) == 0 {
			if rs.ResourceVersion != "" {
				dels = append(dels, store.Key{Kind: store.KindDNSRecordSet, Namespace: p.ns, Name: name})
			}
			continue
		}
		u, err := toUnstructured(rs)
		if err != nil {
			return err
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 && len(dels) == 0 {
		return nil
	}
	if _, err := p.st.ApplyBatch(ctx, objs, dels, store.ApplyOptions{Manager: Manager}); err != nil {
		var mb *store.ManagedByError
		switch {
		case errors.As(err, &mb):
			return &Refusal{fmt.Sprintf("a record set the provider would write is managed by %s: %v", mb.Owner, err)}
		case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrTooLarge):
			return &Refusal{err.Error()}
		}
		return fmt.Errorf("write record sets: %w", err)
	}
	p.logger.Info("external-dns changes applied", "create", len(ch.Create), "update", len(ch.UpdateNew), "delete", len(ch.Delete), "skipped", skipped, "recordSets", len(objs), "deleted", len(dels))
	return nil
}

var rsType = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: store.KindDNSRecordSet}

// metaOf keeps what a rewrite must not lose: name, namespace, labels (such
// as service.io/publish set by someone else) and annotations.
func metaOf(rs *v1alpha1.DNSRecordSet) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: rs.Name, Namespace: rs.Namespace, Labels: rs.Labels, Annotations: rs.Annotations}
}

// toUnstructured makes the object the store applies: spec, name, namespace;
// the version is left out (the store retries a lost race itself and the
// provider holds the only writer of its sets).
func toUnstructured(rs *v1alpha1.DNSRecordSet) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.DNSRecordSet{
		TypeMeta: rsType, ObjectMeta: metaOf(rs), Spec: rs.Spec,
	})
	if err != nil {
		return nil, fmt.Errorf("record set %s: %w", rs.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	return u, nil
}
