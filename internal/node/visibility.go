package node

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
)

// hurriedDebounce replaces debounce while a write waits to be served: a
// burst still lands in one build, and `svc records add` is not held 50ms.
const hurriedDebounce = 2 * time.Millisecond

// visibility answers the API's question "does this node answer with these
// writes yet?" from the snapshot being served (api.Visibility).
type visibility struct {
	snaps *snapshotter
	// settings is the configuration the settings manager holds now: a
	// settings write is served once a snapshot was built from it.
	settings func() *settings.Config
}

// WaitVisible implements api.Visibility.
func (v visibility) WaitVisible(ctx context.Context, writes []api.StoreWrite) (string, bool) {
	var cfg *settings.Config
	for _, w := range writes {
		if w.Settings && v.settings != nil {
			cfg = v.settings()
		}
	}
	return v.snaps.waitServed(ctx, writes, cfg)
}

// served is what the snapshot being served was built from.
type served struct {
	rev      int64                     // highest store revision seen when it was built
	objects  map[store.Key]typedObject // the objects compiled
	lists    map[string]string         // resourceVersion each compiled block list came from ("ns/name")
	settings *settings.Config          // configuration in force when it was built
	done     chan struct{}             // closed when a newer snapshot is served
}

// includes reports whether the snapshot answers with w.
func (sv *served) includes(w api.StoreWrite, cfg *settings.Config) bool {
	if w.Settings {
		return cfg == nil || sv.settings == nil || sv.settings == cfg
	}
	if !isCompiledKind(w.Kind) {
		return true // users, tokens, bindings: no answer depends on them
	}
	k := store.Key{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}
	t, ok := sv.objects[k]
	if w.Deleted {
		return !ok
	}
	if !ok || !revisionAtLeast(t.src.GetResourceVersion(), w.ResourceVersion) {
		return false
	}
	if w.Kind == "BlockList" && sv.lists != nil {
		// The object alone is not enough: its rules are compiled apart
		// (the list reconciler), and served once a build holds the list
		// compiled from this version or a later one (an annotation such as
		// enabled=false changes the rules without a new generation).
		return revisionAtLeast(sv.lists[w.Namespace+"/"+w.Name], w.ResourceVersion)
	}
	return true
}

// revisionAtLeast compares store revisions: integers in both drivers (the
// sqlite sequence, etcd's revision behind Kubernetes resourceVersions);
// anything else only matches itself.
func revisionAtLeast(have, want string) bool {
	h, err1 := strconv.ParseInt(have, 10, 64)
	w, err2 := strconv.ParseInt(want, 10, 64)
	if err1 != nil || err2 != nil {
		return have == want
	}
	return h >= w
}

// waitServed returns once the snapshot being served includes every write
// (cfg: the settings to be in force), or when ctx ends; it returns the
// served snapshot's revision and whether the writes are in it.
func (s *snapshotter) waitServed(ctx context.Context, writes []api.StoreWrite, cfg *settings.Config) (string, bool) {
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	hurried := false
	for {
		s.mu.Lock()
		sv := s.served
		s.mu.Unlock()
		rev := ""
		if sv != nil {
			rev = strconv.FormatInt(sv.rev, 10)
			all := true
			for _, w := range writes {
				if !sv.includes(w, cfg) {
					all = false
					break
				}
			}
			if all {
				return rev, true
			}
		}
		if !hurried {
			// a build already waiting out the debounce starts now
			hurried = true
			select {
			case s.hurry <- struct{}{}:
			default:
			}
		}
		var done <-chan struct{} = s.firstServed
		if sv != nil {
			done = sv.done
		}
		select {
		case <-done:
		case <-ctx.Done():
			return rev, false
		}
	}
}

// listGenerations remembers which BlockList version each compiled list
// came from, so a list write waits for its rules, not just its object.
type listGenerations struct {
	mu  sync.Mutex
	gen map[string]listGen // "ns/name"
}

type listGen struct {
	list *blocklist.List
	rv   string // resourceVersion of the BlockList it was compiled from
}

// compiler is policy.ListCompiler noting each list's version.
func (g *listGenerations) compiler() genCompiler { return genCompiler{g: g} }

type genCompiler struct {
	policy.ListCompiler
	g *listGenerations
}

func (c genCompiler) NewList(bl *v1alpha1.BlockList, sources []policy.CompiledSource) *blocklist.List {
	l := c.ListCompiler.NewList(bl, sources)
	if c.g == nil {
		return l
	}
	c.g.mu.Lock()
	if c.g.gen == nil {
		c.g.gen = map[string]listGen{}
	}
	c.g.gen[bl.Namespace+"/"+bl.Name] = listGen{list: l, rv: bl.ResourceVersion}
	c.g.mu.Unlock()
	return l
}

// of returns the version each of lists was compiled from ("ns/name":
// compiled list).
func (g *listGenerations) of(lists map[string]*blocklist.List) map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]string, len(lists))
	for name, l := range lists {
		if e, ok := g.gen[name]; ok && e.list == l {
			out[name] = e.rv
		}
	}
	return out
}

// listGenerations of the lists the next build compiles (read before the
// build compiles them, so a list swapped in meanwhile counts as older).
func (b *blocking) listGenerations() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gens.of(b.lists)
}
