// Package blocklists is the BlockList reconciler: it fetches URL sources,
// compiles every source through an injected compiler (the data plane's,
// wired by the node; controllers never import the data plane), writes
// status and hands compiled lists to a callback. Decisions are pure
// functions (this file); reconciler.go gathers and writes around them.
package blocklists

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

// Condition types and reasons.
const (
	ConditionReady    = "Ready"
	ConditionDegraded = "Degraded"

	ReasonCompiled      = "Compiled"
	ReasonSourceFailed  = "SourceFailed"
	ReasonFetchFailed   = "FetchFailed"
	ReasonAsExpected    = "AsExpected"
	ReasonDisabled      = "Disabled"
	ReasonStaleExcludes = "StaleExcludes"
	// ReasonConfigMapNamespace: a configMapRef names another namespace's
	// ConfigMap (refused, never read).
	ReasonConfigMapNamespace = "ConfigMapNamespaceNotAllowed"
)

// SourceResult is what gathering found for one source.
type SourceResult struct {
	Name     string
	Disabled bool // source enabled:false or the list switched off
	// Compiled: a body (or entries) was compiled and is served.
	Compiled bool
	// Stale: served from the cache of an earlier fetch after a failure.
	Stale bool
	Err   string
	// Reason, when set, names why the source was refused (it becomes the
	// Ready reason instead of SourceFailed).
	Reason string
	// From fetching (URL sources).
	Digest, ETag string
	LastFetched  time.Time
	// Counts from compiling.
	Entries, Invalid, Unsupported, Excluded, RuleCount int
	StaleExcludes                                      []string
}

// DesiredStatus computes the status of a list from what gathering found. It
// keeps lastTransitionTime of conditions whose status did not change.
func DesiredStatus(bl *v1alpha1.BlockList, listEnabled bool, results []SourceResult, now time.Time) v1alpha1.BlockListStatus {
	st := v1alpha1.BlockListStatus{ObservedGeneration: bl.Generation,
		Conditions: append([]metav1.Condition(nil), bl.Status.Conditions...)}
	var failed, degraded []string
	failReason := ReasonSourceFailed
	var last time.Time
	for _, r := range results {
		ss := v1alpha1.BlockListSourceStatus{Name: r.Name, Digest: r.Digest, ETag: r.ETag, Error: r.Err}
		if !r.LastFetched.IsZero() {
			t := metav1.NewTime(r.LastFetched.UTC().Truncate(time.Second))
			ss.LastFetched = &t
			if r.LastFetched.After(last) {
				last = r.LastFetched
			}
		}
		if r.Disabled {
			f := false
			ss.Enabled = &f
			st.Sources = append(st.Sources, ss)
			continue
		}
		ss.Entries, ss.Invalid, ss.Excluded = int64(r.Entries), int64(r.Invalid), int64(r.Excluded)
		if len(r.StaleExcludes) > 0 {
			ss.StaleExcludes = append([]string(nil), r.StaleExcludes...)
			if len(ss.StaleExcludes) > 50 {
				ss.StaleExcludes = ss.StaleExcludes[:50]
			}
		}
		st.Sources = append(st.Sources, ss)
		if r.Compiled {
			st.Entries += int64(r.Entries)
			st.Invalid += int64(r.Invalid)
			st.Unsupported += int64(r.Unsupported)
			st.RuleCount += int64(r.RuleCount)
		}
		switch {
		case !r.Compiled:
			failed = append(failed, fmt.Sprintf("%s: %s", r.Name, r.Err))
			if r.Reason != "" {
				failReason = r.Reason
			}
		case r.Stale || r.Err != "":
			degraded = append(degraded, fmt.Sprintf("%s: %s", r.Name, r.Err))
		}
	}
	if !last.IsZero() {
		t := metav1.NewTime(last.UTC().Truncate(time.Second))
		st.LastFetched = &t
	}
	sort.Slice(st.Sources, func(i, j int) bool { return st.Sources[i].Name < st.Sources[j].Name })
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	set := func(typ string, ok metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: ok, Reason: reason,
			Message: msg, ObservedGeneration: bl.Generation, LastTransitionTime: ts})
	}
	switch {
	case !listEnabled:
		set(ConditionReady, metav1.ConditionTrue, ReasonDisabled, "list switched off by the service.io/enabled annotation")
	case len(failed) > 0:
		set(ConditionReady, metav1.ConditionFalse, failReason, strings.Join(failed, "; "))
	default:
		set(ConditionReady, metav1.ConditionTrue, ReasonCompiled, fmt.Sprintf("%d rules from %d sources", st.RuleCount, len(results)))
	}
	if len(degraded) > 0 {
		set(ConditionDegraded, metav1.ConditionTrue, ReasonFetchFailed, "serving cached bodies: "+strings.Join(degraded, "; "))
	} else {
		set(ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
	}
	return st
}

// StatusChanged reports whether a write is needed.
func StatusChanged(old, desired v1alpha1.BlockListStatus) bool {
	return !equality.Semantic.DeepEqual(old, desired)
}

// RefreshInterval is the list's spec.refreshInterval, else def.
func RefreshInterval(bl *v1alpha1.BlockList, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(bl.Spec.RefreshInterval); err == nil && d > 0 {
		return d
	}
	if def <= 0 {
		def = 24 * time.Hour
	}
	return def
}

// FetchDue reports whether a URL source is fetched now: never fetched, or
// its last successful contact is at least interval ago.
func FetchDue(lastFetched time.Time, interval time.Duration, now time.Time) bool {
	return lastFetched.IsZero() || now.Sub(lastFetched) >= interval
}

// SourceName is a source's name, or "source-<i>" when it has none.
func SourceName(s v1alpha1.BlockListSource, i int) string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("source-%d", i)
}
