package operator

import (
	"context"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/zones"
	"github.com/svcdns/svc/internal/store"
)

// eventRecorder is the part of the manager's recorder the status reconciler
// uses.
type eventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// statusReconciler writes the status of DNSZone and DNSRecordSet objects from
// the data plane's own compile step (zones.Evaluate): the serial every
// data-plane pod serves, counts, and a Ready condition saying what is not
// served and why, with an Event when Ready changes. A change to a zone or to
// one record set re-evaluates the whole zone, because one object can change
// another's fate (a deleted zone, a CNAME that now collides, a namespace that
// is no longer allowed).
type statusReconciler struct {
	store  store.Store
	events eventRecorder
	now    func() time.Time
	// serials is shared by every reconcile, as in a data-plane process.
	serials zones.Serials

	mu   sync.Mutex
	busy map[string]chan struct{} // zones being evaluated
}

// lockZone waits until no other reconcile evaluates zone and claims it.
func (r *statusReconciler) lockZone(zone string) (unlock func()) {
	for {
		r.mu.Lock()
		if r.busy == nil {
			r.busy = map[string]chan struct{}{}
		}
		ch, held := r.busy[zone]
		if !held {
			ch = make(chan struct{})
			r.busy[zone] = ch
			r.mu.Unlock()
			return func() {
				r.mu.Lock()
				delete(r.busy, zone)
				r.mu.Unlock()
				close(ch)
			}
		}
		r.mu.Unlock()
		<-ch
	}
}

// zoneNotFoundRetry is how often a record set whose zone does not exist is
// looked at again.
const zoneNotFoundRetry = 15 * time.Second

// conflictRetry is how soon a zone is evaluated again after a status write
// lost a race (another reconcile of the same zone, or the store's cache not
// yet showing this operator's own last write).
const conflictRetry = 200 * time.Millisecond

// lostRace reports a status write that met a newer or deleted object: the
// evaluation is simply repeated on the store's next view.
func lostRace(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound)
}

func (r *statusReconciler) reconcileRecordSet(ctx context.Context, ns, name string) (time.Duration, error) {
	rs, err := r.store.Get(ctx, store.KindDNSRecordSet, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil // its zone's reconcile recounts (zones requeue each minute)
	}
	if err != nil {
		return 0, err
	}
	zone, _, _ := unstructured.NestedString(rs.Object, "spec", "zoneRef", "name")
	found, err := r.syncZone(ctx, zone)
	if lostRace(err) {
		return conflictRetry, nil
	}
	if err != nil {
		return 0, err
	}
	if !found {
		// Zone changes reach record sets through syncZone; this is a safety
		// net for a zone the store had not seen yet.
		return zoneNotFoundRetry, nil
	}
	return 0, nil
}

func (r *statusReconciler) reconcileZone(ctx context.Context, _, name string) (time.Duration, error) {
	if _, err := r.syncZone(ctx, name); lostRace(err) {
		return conflictRetry, nil
	} else if err != nil {
		return 0, err
	}
	// Record set deletions recount on the zone's next reconcile.
	return time.Minute, nil
}

// syncZone compiles zone name with its record sets and writes every status
// that changed; a deleted zone leaves its record sets ZoneNotFound. It
// reports whether the zone exists.
func (r *statusReconciler) syncZone(ctx context.Context, name string) (bool, error) {
	// One evaluation of a zone at a time: the zone and record set
	// controllers both land here and would otherwise race on the same writes.
	unlock := r.lockZone(name)
	defer unlock()
	allZones, err := store.ListTyped[v1alpha1.DNSZone](ctx, r.store, store.KindDNSZone, "")
	if err != nil {
		return false, err
	}
	// Every record set, not only this zone's: the serial rule (r.serials)
	// remembers what each compiled zone held, and a zone compiled without
	// its record sets would look changed and get a new serial on every
	// other zone's reconcile (status.serial then climbed without end as
	// soon as two zones existed, and the data planes stopped agreeing).
	allSets, err := store.ListTyped[v1alpha1.DNSRecordSet](ctx, r.store, store.KindDNSRecordSet, "")
	if err != nil {
		return false, err
	}
	var sets []v1alpha1.DNSRecordSet
	for i := range allSets {
		if allSets[i].Spec.ZoneRef.Name == name {
			sets = append(sets, allSets[i])
		}
	}
	found := false
	var own []v1alpha1.DNSZone
	for i := range allZones {
		if allZones[i].Name == name {
			found = true
			own = append(own, allZones[i])
		}
	}
	// Every zone is compiled (two objects may declare the same DNS name), but
	// only this one's status and its record sets' are written.
	res := zones.Evaluate(&r.serials, allZones, allSets, r.now())
	w := zones.Writer{Store: r.store, Now: r.now, Event: r.event}
	return found, w.Sync(ctx, own, sets, res)
}

func (r *statusReconciler) event(obj *unstructured.Unstructured, ready metav1.Condition) {
	if r.events == nil {
		return
	}
	typ := "Normal"
	if ready.Status != metav1.ConditionTrue {
		typ = "Warning"
	}
	r.events.Eventf(obj, nil, typ, ready.Reason, "Reconcile", "%s", ready.Message)
}
