// Package publish writes record sets labelled service.io/publish=<target>
// to other DNS servers and reports the outcome in their
// status.publications[]. The one target type is rfc2136: DNS UPDATE (RFC
// 2136), signed with TSIG, to the primary of a zone. Endpoints with
// service.view: public are published and never served (the compile step
// skips them); other eligible endpoints are served and published.
//
// The publisher remembers which RRsets it published (State) and only ever
// replaces or removes those: a name and type it published is its own
// whole, every other RRset of the zone is left alone.
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/store"
)

// Publication states (status.publications[].state).
const (
	StateAccepted   = "Accepted"
	StateProgrammed = "Programmed"
	StateFailed     = "Failed"
)

// Timings of the loop.
const (
	debounce    = 200 * time.Millisecond
	retryMin    = time.Second
	retryMax    = 5 * time.Minute
	resyncEvery = time.Hour // every desired RRset is sent again: repairs edits made at the target
	// maxMessage bounds status messages.
	maxMessage = 500
)

// Options configure New.
type Options struct {
	Store   store.Store
	Targets []Target
	State   State
	Logger  *slog.Logger
	Now     func() time.Time
}

// Publisher reconciles every target with the labelled record sets.
type Publisher struct {
	st      store.Store
	targets map[string]*Target
	state   State
	log     *slog.Logger
	now     func() time.Time

	snaps    map[string]*Snapshot
	lastFull time.Time
	// failed are the RRsets whose last UPDATE failed, per target: sent
	// again, they stay Failed rather than flip to Accepted (a status write
	// per retry would also start the next pass at once).
	failed map[string]map[string]string
}

// New checks opts; Run does the work.
func New(opts Options) (*Publisher, error) {
	if opts.Store == nil || opts.State == nil {
		return nil, errors.New("publish: a store and a state are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Publisher{st: opts.Store, state: opts.State, log: opts.Logger, now: opts.Now,
		targets: map[string]*Target{}, snaps: map[string]*Snapshot{}, failed: map[string]map[string]string{}}
	for i := range opts.Targets {
		t := opts.Targets[i]
		t.Zone = dns.CanonicalName(t.Zone)
		if t.Timeout <= 0 {
			t.Timeout = 5 * time.Second
		}
		if _, dup := p.targets[t.Name]; dup {
			return nil, fmt.Errorf("publish: target %q configured twice", t.Name)
		}
		p.targets[t.Name] = &t
	}
	return p, nil
}

// Run publishes until ctx ends: a pass after every change of a DNSZone or
// DNSRecordSet (debounced), failed passes again with backoff, and every
// resyncEvery a pass that sends every RRset again.
func (p *Publisher) Run(ctx context.Context) error {
	for name, t := range p.targets {
		s, err := p.state.Load(ctx, name)
		if err != nil {
			return fmt.Errorf("publish: state of target %s: %w", name, err)
		}
		if s != nil && (s.Server != t.Server || s.Zone != t.Zone) {
			// The records at the old server or zone are not this target's
			// any more; removing them there is left to the operator.
			p.log.Warn("publish: target's server or zone changed; RRsets published before are forgotten", "target", name,
				"was", s.Server+" "+s.Zone, "now", t.Server+" "+t.Zone, "rrsets", len(s.RRsets))
			s = nil
		}
		if s == nil {
			s = &Snapshot{Version: snapshotVersion, Server: t.Server, Zone: t.Zone, RRsets: map[string]Published{}}
		}
		p.snaps[name] = s
	}
	kick := make(chan struct{}, 1)
	for _, kind := range []string{store.KindDNSRecordSet, store.KindDNSZone} {
		go p.follow(ctx, kind, kick)
	}
	p.lastFull = p.now()
	full := true // the first pass after a start sends everything once
	backoff := retryMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
			// Let a burst of changes settle into one pass.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(debounce):
			}
		case <-timer.C:
		}
		select {
		case <-kick:
		default:
		}
		if p.now().Sub(p.lastFull) >= resyncEvery {
			full = true
		}
		next, err := p.pass(ctx, full)
		wait := resyncEvery
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.log.Warn("publish: pass incomplete", "err", err, "retry", backoff)
			wait, backoff = backoff, min(2*backoff, retryMax)
		} else {
			backoff = retryMin
		}
		if full {
			// One resend of everything per period, whatever failed: the
			// failures are sent again as changes.
			full, p.lastFull = false, p.now()
		}
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(p.now()), debounce))
		}
		timer.Reset(wait)
	}
}

// follow kicks a pass on every change of kind, watching again after a
// failed watch.
func (p *Publisher) follow(ctx context.Context, kind string, kick chan<- struct{}) {
	backoff := retryMin
	for ctx.Err() == nil {
		ch, err := p.st.Watch(ctx, store.WatchOptions{Kind: kind})
		if err == nil {
			backoff = retryMin
			for ev := range ch {
				if ev.Err != nil {
					err = ev.Err
					break
				}
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}
		if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
			return
		}
		p.log.Warn("publish: watch ended; watching again", "kind", kind, "err", err, "retry", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, retryMax)
		select {
		case kick <- struct{}{}: // changes during the gap
		default:
		}
	}
}

// outcome is one pass's result at one target.
type outcome struct {
	failed map[string]string // RRset key -> why
}

// pass reconciles every target once and writes the statuses. It returns
// when the plan changes next by itself (an endpoint expires) and an error
// when anything is left to retry.
func (p *Publisher) pass(ctx context.Context, full bool) (time.Time, error) {
	zones, err := store.ListTyped[v1alpha1.DNSZone](ctx, p.st, store.KindDNSZone, "")
	if err != nil {
		return time.Time{}, err
	}
	sets, err := store.ListTyped[v1alpha1.DNSRecordSet](ctx, p.st, store.KindDNSRecordSet, "")
	if err != nil {
		return time.Time{}, err
	}
	pl := buildPlan(p.targets, zones, sets, p.now())
	var errs []error
	names := make([]string, 0, len(p.targets))
	for n := range p.targets {
		names = append(names, n)
	}
	sort.Strings(names)
	pending := map[string]bool{}
	changes := map[string][]change{}
	for _, n := range names {
		changes[n] = p.changes(n, pl.rrsets[n], full)
		for _, c := range changes[n] {
			if _, retry := p.failed[n][c.key]; !retry {
				pending[n+"\x00"+c.key] = true
			}
		}
	}
	// Accepted first, so a slow or unreachable server shows as queued
	// rather than as the last outcome; record sets that send nothing
	// (refused, unlabelled) get their final entry now.
	errs = append(errs, p.writeStatuses(ctx, sets, pl,
		func(sp *setPlan) bool { return sp == nil || sp.refused != "" || anyPending(sp, pending) },
		func(sp *setPlan) v1alpha1.Publication { return p.publication(sp, nil, pending) }))
	// Targets are independent: a primary that hangs delays only its own
	// record sets.
	results := make([]*outcome, len(names))
	errsBy := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := p.apply(ctx, n, changes[n])
			results[i] = o
			outcomes := map[string]*outcome{n: o}
			werr := p.writeStatuses(ctx, sets, pl,
				func(sp *setPlan) bool { return sp != nil && sp.target == n && sp.refused == "" },
				func(sp *setPlan) v1alpha1.Publication { return p.publication(sp, outcomes, nil) })
			errsBy[i] = errors.Join(err, werr)
		}()
	}
	wg.Wait()
	for i, n := range names {
		p.failed[n] = results[i].failed
	}
	errs = append(errs, errsBy...)
	return pl.next, errors.Join(errs...)
}

// changes lists the UPDATEs that bring target n from its snapshot to
// desired: RRsets that differ (all of them when full), and RRsets it
// published that are no longer desired.
func (p *Publisher) changes(n string, desired map[string]*rrset, full bool) []change {
	snap := p.snaps[n]
	var out []change
	for key, d := range desired {
		if pub, ok := snap.RRsets[key]; full || !ok || !slices.Equal(pub.Records, d.texts()) {
			out = append(out, change{key: key, name: d.name, rtype: d.rtype, rrs: d.rrs})
		}
	}
	for key, pub := range snap.RRsets {
		if _, ok := desired[key]; !ok {
			rtype, ok := dns.StringToType[pub.Type]
			if !ok {
				continue // a snapshot from a later version; left alone
			}
			out = append(out, change{key: key, name: pub.Name, rtype: rtype})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// apply sends changes to target n, saving the snapshot before (every RRset
// about to be written is claimed) and after.
func (p *Publisher) apply(ctx context.Context, n string, changes []change) (*outcome, error) {
	o := &outcome{failed: map[string]string{}}
	if len(changes) == 0 {
		return o, nil
	}
	t, snap := p.targets[n], p.snaps[n]
	var claimed []string
	for _, c := range changes {
		if _, ok := snap.RRsets[c.key]; !ok && len(c.rrs) > 0 {
			snap.RRsets[c.key] = Published{Name: c.name, Type: dns.TypeToString[c.rtype]}
			claimed = append(claimed, c.key)
		}
	}
	if len(claimed) > 0 {
		// A crash after the UPDATE must not leave an RRset the state
		// does not know: it could then never be removed. Nothing is sent
		// until the claims are stored, and claims that were not stored
		// are taken back (the next pass claims them again).
		if err := p.state.Save(ctx, n, snap); err != nil {
			for _, key := range claimed {
				delete(snap.RRsets, key)
			}
			for _, c := range changes {
				o.failed[c.key] = "the publisher's state cannot be saved: " + err.Error()
			}
			return o, fmt.Errorf("target %s: save state: %w", n, err)
		}
	}
	var firstErr error
	for i, c := range changes {
		if ctx.Err() != nil {
			return o, ctx.Err()
		}
		err := t.send(ctx, c)
		if err != nil {
			o.failed[c.key] = err.Error()
			if firstErr == nil {
				firstErr = fmt.Errorf("target %s: %s: %w", n, c.key, err)
			}
			if errors.Is(err, errTransport) {
				// The server is not answering: the rest waits for the retry.
				for _, rest := range changes[i+1:] {
					o.failed[rest.key] = strings.TrimPrefix(err.Error(), errTransport.Error()+": ")
				}
				o.failed[c.key] = strings.TrimPrefix(err.Error(), errTransport.Error()+": ")
				break
			}
			continue
		}
		if len(c.rrs) == 0 {
			delete(snap.RRsets, c.key)
			p.log.Info("publish: removed", "target", n, "rrset", c.key)
			continue
		}
		d := &rrset{name: c.name, rtype: c.rtype, rrs: c.rrs, ttl: c.rrs[0].Header().Ttl}
		snap.RRsets[c.key] = Published{Name: c.name, Type: dns.TypeToString[c.rtype], Records: d.texts()}
		p.log.Info("publish: published", "target", n, "rrset", c.key, "records", len(c.rrs))
	}
	if err := p.state.Save(ctx, n, snap); err != nil {
		return o, errors.Join(firstErr, fmt.Errorf("target %s: save state: %w", n, err))
	}
	return o, firstErr
}

// publication is the status entry of a planned record set. pending (when
// set) marks a status written before the UPDATEs: the set's changed RRsets
// are Accepted.
func (p *Publisher) publication(sp *setPlan, outcomes map[string]*outcome, pending map[string]bool) v1alpha1.Publication {
	pub := v1alpha1.Publication{Integration: sp.target}
	if sp.refused != "" {
		pub.State, pub.Message = StateFailed, sp.refused
		return pub
	}
	t := p.targets[sp.target]
	snap := p.snaps[sp.target]
	var failed []string
	queued := 0
	for _, key := range sp.keys {
		if pending != nil && pending[sp.target+"\x00"+key] {
			queued++
			continue
		}
		if o := outcomes[sp.target]; o != nil {
			if why, ok := o.failed[key]; ok {
				failed = append(failed, key+": "+why)
				continue
			}
		}
		if pub, ok := snap.RRsets[key]; !ok || pub.Records == nil {
			queued++
		}
	}
	switch {
	case len(failed) > 0:
		pub.State, pub.Message = StateFailed, failed[0]
		if len(failed) > 1 {
			pub.Message += fmt.Sprintf(" (and %d more RRsets)", len(failed)-1)
		}
	case queued > 0:
		pub.State, pub.Message = StateAccepted, fmt.Sprintf("%d of %d RRsets queued for %s", queued, len(sp.keys), t.Server)
	default:
		pub.State, pub.Message = StateProgrammed, fmt.Sprintf("%d RRsets in zone %s at %s", len(sp.keys), strings.TrimSuffix(t.Zone, "."), t.Server)
	}
	if len(sp.problems) > 0 {
		// The rest is published; what is not must not hide behind Programmed.
		msg := "not published: " + strings.Join(sp.problems, "; ")
		if pub.State == StateFailed {
			msg = pub.Message + "; " + msg
		}
		pub.State, pub.Message = StateFailed, msg
	}
	if len(pub.Message) > maxMessage {
		pub.Message = pub.Message[:maxMessage] + "..."
	}
	return pub
}

// writeStatuses brings status.publications of the record sets keep
// selects (sp nil: not labelled) in line: planned sets get entry(sp) for
// their target, and entries of configured targets that no longer apply
// (label removed or changed) are dropped. Entries of other integrations
// are kept.
func (p *Publisher) writeStatuses(ctx context.Context, sets []v1alpha1.DNSRecordSet, pl *plan, keep func(*setPlan) bool, entry func(*setPlan) v1alpha1.Publication) error {
	var errs []error
	for i := range sets {
		rs := &sets[i]
		id := rs.Namespace + "/" + rs.Name
		sp := pl.sets[id]
		if !keep(sp) {
			continue
		}
		want := make([]v1alpha1.Publication, 0, len(rs.Status.Publications)+1)
		for _, e := range rs.Status.Publications {
			if !p.ours(e, sp) {
				want = append(want, e)
			}
		}
		if sp != nil {
			want = append(want, entry(sp))
		}
		sort.Slice(want, func(a, b int) bool { return want[a].Integration < want[b].Integration })
		if len(want) == 0 && len(rs.Status.Publications) == 0 {
			continue
		}
		if reflect.DeepEqual(want, rs.Status.Publications) {
			continue
		}
		if err := p.writePublications(ctx, rs.Namespace, rs.Name, func(old []v1alpha1.Publication) []v1alpha1.Publication {
			// Re-merge onto the stored entries: another integration may
			// have written meanwhile.
			out := make([]v1alpha1.Publication, 0, len(old)+1)
			for _, e := range old {
				if !p.ours(e, sp) {
					out = append(out, e)
				}
			}
			for _, e := range want {
				if p.ours(e, sp) {
					out = append(out, e)
				}
			}
			sort.Slice(out, func(a, b int) bool { return out[a].Integration < out[b].Integration })
			return out
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ours reports whether this publisher wrote (or now owns) entry e of a
// record set planned as sp (nil: not labelled): entries of configured
// targets, of the set's current label, and the unknown-target entries it
// writes. Entries of other integrations are never touched.
func (p *Publisher) ours(e v1alpha1.Publication, sp *setPlan) bool {
	return p.targets[e.Integration] != nil || (sp != nil && e.Integration == sp.target) ||
		(e.State == StateFailed && strings.HasPrefix(e.Message, unknownTargetPrefix))
}

func anyPending(sp *setPlan, pending map[string]bool) bool {
	for _, k := range sp.keys {
		if pending[sp.target+"\x00"+k] {
			return true
		}
	}
	return false
}

// writePublications replaces status.publications of one record set with
// edit(stored entries), keeping the rest of its status; a write that meets
// a newer object reads it again (a few times: the zone status writer
// writes the same objects).
func (p *Publisher) writePublications(ctx context.Context, ns, name string, edit func([]v1alpha1.Publication) []v1alpha1.Publication) error {
	var err error
	for range 5 {
		var u *unstructured.Unstructured
		u, err = p.st.Get(ctx, store.KindDNSRecordSet, ns, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var rs v1alpha1.DNSRecordSet
		if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rs); err != nil {
			return fmt.Errorf("DNSRecordSet %s/%s: %w", ns, name, err)
		}
		next := edit(rs.Status.Publications)
		if reflect.DeepEqual(next, rs.Status.Publications) || (len(next) == 0 && len(rs.Status.Publications) == 0) {
			return nil
		}
		status, _, _ := unstructured.NestedMap(u.Object, "status")
		if status == nil {
			status = map[string]any{}
		}
		if len(next) == 0 {
			delete(status, "publications")
		} else {
			l := make([]any, len(next))
			for i, e := range next {
				m := map[string]any{"integration": e.Integration, "state": e.State}
				if e.Message != "" {
					m["message"] = e.Message
				}
				l[i] = m
			}
			status["publications"] = l
		}
		u.Object["status"] = status
		if _, err = p.st.UpdateStatus(ctx, u); err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) {
			break
		}
	}
	return fmt.Errorf("status of DNSRecordSet %s/%s: %w", ns, name, err)
}
