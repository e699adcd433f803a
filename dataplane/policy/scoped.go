package policy

import (
	"context"
	"slices"
	"strings"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/blocklist"
)

// scopedList holds the entries of one BlockList confined to one set of
// client groups (spec.sources[].entries[].groups). They are compiled apart
// from the list's sources, so the list itself keeps serving everyone it
// reaches and these rules only the clients of the groups.
type scopedList struct {
	groups map[string]struct{} // "namespace/name"
	list   *blocklist.List
}

// appliesTo reports whether one of the client's groups is in the set.
func (s *scopedList) appliesTo(groups []string) bool {
	for _, g := range groups {
		if _, ok := s.groups[g]; ok {
			return true
		}
	}
	return false
}

// Scoped reports whether an entry is confined to client groups; the list
// compiler leaves such entries out of the list's sources.
func Scoped(e v1alpha1.BlockListEntry) bool { return len(e.Groups) > 0 }

// compileScoped compiles the group-confined entries of a list, one small
// list per distinct group set. Entries of disabled sources and disabled
// entries are left out, as the list compiler leaves them out.
func compileScoped(ctx context.Context, bl *v1alpha1.BlockList) []scopedList {
	type set struct {
		groups  []string
		entries []blocklist.Entry
	}
	var order []string
	sets := map[string]*set{}
	for _, src := range bl.Spec.Sources {
		if src.Enabled != nil && !*src.Enabled {
			continue
		}
		for _, e := range src.Entries {
			if !Scoped(e) || (e.Enabled != nil && !*e.Enabled) {
				continue
			}
			gs := make([]string, 0, len(e.Groups))
			for _, g := range e.Groups {
				if g = strings.TrimSpace(g); g != "" {
					gs = append(gs, ref(bl.Namespace, g))
				}
			}
			slices.Sort(gs)
			gs = slices.Compact(gs)
			k := strings.Join(gs, ",")
			s := sets[k]
			if s == nil {
				s = &set{groups: gs}
				sets[k] = s
				order = append(order, k)
			}
			s.entries = append(s.entries, blocklist.Entry{Value: e.Value, Type: blocklist.EntryType(e.Type)})
		}
	}
	if len(order) == 0 {
		return nil
	}
	spec := blocklist.ListSpec{Name: key(bl.Namespace, bl.Name), Mode: blocklist.Mode(bl.Spec.Mode),
		Disabled: !blocklist.EnabledByAnnotations(bl.Annotations)}
	out := make([]scopedList, 0, len(order))
	for _, k := range order {
		s := sets[k]
		// the rule texts in the query log name the entries' own source
		src, err := blocklist.CompileSource(ctx, blocklist.SourceSpec{Name: "groups:" + k, Entries: s.entries}, nil)
		if err != nil {
			continue // entries only: no body to fail on
		}
		gs := make(map[string]struct{}, len(s.groups))
		for _, g := range s.groups {
			gs[g] = struct{}{}
		}
		out = append(out, scopedList{groups: gs, list: blocklist.NewList(spec, []*blocklist.Source{src})})
	}
	return out
}

// withScoped returns lists with the group-confined entries of each list
// compiled (copies: the caller's Input is not changed).
func withScoped(ctx context.Context, lists map[string]*List) map[string]*List {
	out := make(map[string]*List, len(lists))
	for k, l := range lists {
		if l.Compiled != nil && l.Object != nil {
			if sc := compileScoped(ctx, l.Object); sc != nil {
				c := *l
				c.scoped = sc
				l = &c
			}
		}
		out[k] = l
	}
	return out
}
