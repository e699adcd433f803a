package unblock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/suggest"
)

const (
	kindBlockList   = "BlockList"
	kindPolicy      = "Policy"
	kindClientGroup = "ClientGroup"
	// writeAttempts bounds the read-modify-write retries of a list or policy
	// that another writer changed meanwhile.
	writeAttempts = 5
)

// Get reads one request.
func (s *Service) Get(ctx context.Context, ns, name string) (*v1alpha1.UnblockRequest, error) {
	u, err := s.st.Get(ctx, Kind, ns, name)
	if err != nil {
		return nil, fmt.Errorf("unblock request %s/%s: %w", ns, name, err)
	}
	return fromUnstructured(u)
}

// ListOptions filter List.
type ListOptions struct {
	Namespace string // "": every namespace
	Phase     string // "": every phase
	Domain    string // substring of the domain
}

// List returns the matching requests, pending first (oldest first, the
// queue order), then the decided and expired ones newest first.
func (s *Service) List(ctx context.Context, o ListOptions) ([]v1alpha1.UnblockRequest, error) {
	all, err := s.listAll(ctx, o.Namespace)
	if err != nil {
		return nil, err
	}
	d := strings.ToLower(o.Domain)
	out := all[:0]
	for _, r := range all {
		if (o.Phase == "" || phaseOf(&r) == o.Phase) && (d == "" || strings.Contains(r.Spec.Domain, d)) {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := phaseOf(&out[i]) == PhasePending, phaseOf(&out[j]) == PhasePending
		if pi != pj {
			return pi
		}
		ti, tj := out[i].CreationTimestamp.Time, out[j].CreationTimestamp.Time
		if !ti.Equal(tj) {
			if pi {
				return ti.Before(tj)
			}
			return ti.After(tj)
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

// decided refuses a decision on a request that is not pending.
func decided(r *v1alpha1.UnblockRequest) error {
	ph := phaseOf(r)
	if ph == PhasePending {
		return nil
	}
	msg := fmt.Sprintf("unblock request %s/%s is %s", r.Namespace, r.Name, ph)
	if r.Status.DecidedBy != "" && r.Status.DecidedAt != nil {
		msg += fmt.Sprintf(" (by %s at %s)", r.Status.DecidedBy, r.Status.DecidedAt.UTC().Format(time.RFC3339))
	}
	return &Error{Key: "conflict", Msg: msg, Hint: "only pending requests are decided; add an allow entry to a list instead, or let the requester file a new request", Err: ErrDecided}
}

// decideAttempts is how often a decision is tried when the request's
// version moved under it: the reconciler writes a new request's expiry just
// after it is filed, and an administrator deciding at that moment must not
// get a conflict for it. A request decided meanwhile is refused by decided.
const decideAttempts = 3

// retryDecision runs once until it succeeds, fails for another reason than
// a version conflict, or decideAttempts ran.
func retryDecision(once func() (*v1alpha1.UnblockRequest, error)) (*v1alpha1.UnblockRequest, error) {
	for attempt := 1; ; attempt++ {
		out, err := once()
		if err == nil || attempt == decideAttempts || !(errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict)) {
			return out, err
		}
	}
}

// Approve carries out an approval: the allow entries are written (and the
// list attached to the policies that need it) before the request records
// the decision, so an approved request always has its entries. A request
// that changed meanwhile is read again (it may have been decided by another
// administrator: then refused) and, still pending, approved; the entries of
// the attempt that lost are taken back.
func (s *Service) Approve(ctx context.Context, ns, name string, a Approval) (*v1alpha1.UnblockRequest, error) {
	return retryDecision(func() (*v1alpha1.UnblockRequest, error) { return s.approveOnce(ctx, ns, name, a) })
}

func (s *Service) approveOnce(ctx context.Context, ns, name string, a Approval) (*v1alpha1.UnblockRequest, error) {
	r, err := s.Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if err := decided(r); err != nil {
		return nil, err
	}
	now := s.now()
	policies, err := store.ListTyped[v1alpha1.Policy](ctx, s.st, kindPolicy, ns)
	if err != nil {
		return nil, err
	}
	if a.Scope == ScopeGroups {
		var gs []string
		for _, g := range a.Groups {
			gs = append(gs, groupRef(ns, strings.TrimSpace(g)))
		}
		if err := s.checkGroups(ctx, gs); err != nil {
			return nil, err
		}
	}
	plan, err := PlanApproval(r, a, policies, now)
	if err != nil {
		return nil, err
	}
	ref := ns + "/" + name
	s.decide.Lock()
	defer s.decide.Unlock()
	if err := s.addEntries(ctx, ns, plan); err != nil {
		return nil, err
	}
	undo := func(cause error) error {
		if err := RemoveEntries(context.WithoutCancel(ctx), s.st, ns+"/"+plan.List, ref); err != nil {
			s.log.Warn("taking back the allow entries of a failed approval", "request", ref, "err", err)
		}
		return cause
	}
	attached, err := s.attach(ctx, ns, plan)
	if err != nil {
		return nil, undo(err)
	}
	// the terms, in spec (CRD rules check them once more)
	r.Spec.Scope, r.Spec.Match, r.Spec.Duration = plan.Scope, plan.Match, plan.Duration
	r.Spec.Groups = nil
	if plan.Scope == ScopeGroups {
		r.Spec.Groups = plan.Groups
	}
	r.Spec.Permanent = nil
	if plan.Permanent {
		t := true
		r.Spec.Permanent = &t
	}
	u, err := toUnstructured(r)
	if err != nil {
		return nil, undo(err)
	}
	res, err := s.st.Apply(ctx, u, store.ApplyOptions{Manager: store.OwnerOf(u), ResourceVersion: r.ResourceVersion})
	if err != nil {
		if errors.Is(err, store.ErrPrecondition) {
			err = &Error{Key: "conflict", Msg: fmt.Sprintf("unblock request %s changed while it was approved", ref), Hint: "read it again: another administrator may have decided it", Err: err}
		}
		return nil, undo(fmt.Errorf("approve %s: %w", ref, err))
	}
	next, err := fromUnstructured(res.Object)
	if err != nil {
		return nil, undo(err)
	}
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	next.Status.Phase, next.Status.DecidedBy, next.Status.DecidedAt = PhaseApproved, clip(a.By, 300), &at
	next.Status.Comment = clipRunes(a.Comment, 1000)
	next.Status.Entry = ns + "/" + plan.List
	next.Status.Policies = attached
	next.Status.ExpiresAt = nil
	until := "permanently"
	if plan.ExpiresAt != nil {
		t := metav1.NewTime(*plan.ExpiresAt)
		next.Status.ExpiresAt = &t
		until = "until " + plan.ExpiresAt.Format(time.RFC3339)
	}
	setReady(&next.Status, metav1.ConditionTrue, "Approved", fmt.Sprintf("approved by %s for %s (%s) %s; allow entries in %s",
		a.By, scopeText(plan), plan.Match, until, next.Status.Entry), now)
	out, err := s.writeStatus(ctx, next)
	if err != nil {
		return nil, undo(fmt.Errorf("approve %s: %w", ref, err))
	}
	s.log.Info("unblock request approved", "request", ref, "domain", r.Spec.Domain, "by", a.By, "scope", plan.Scope, "list", next.Status.Entry, "until", until)
	return out, nil
}

func scopeText(p Plan) string {
	if p.Scope == ScopeGroups {
		return "groups " + strings.Join(p.Groups, ", ")
	}
	return "everyone"
}

// Deny records a denial: who, when and why (read again and retried when
// the request's version moved under it, as Approve).
func (s *Service) Deny(ctx context.Context, ns, name, comment, by string) (*v1alpha1.UnblockRequest, error) {
	return retryDecision(func() (*v1alpha1.UnblockRequest, error) { return s.denyOnce(ctx, ns, name, comment, by) })
}

func (s *Service) denyOnce(ctx context.Context, ns, name, comment, by string) (*v1alpha1.UnblockRequest, error) {
	r, err := s.Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if err := decided(r); err != nil {
		return nil, err
	}
	c, err := cleanText("comment", comment, 1000)
	if err != nil {
		return nil, err
	}
	now := s.now()
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	r.Status.Phase, r.Status.DecidedBy, r.Status.DecidedAt, r.Status.Comment = PhaseDenied, clip(by, 300), &at, c
	r.Status.ExpiresAt = nil
	msg := "denied by " + by
	if c != "" {
		msg += ": " + c
	}
	setReady(&r.Status, metav1.ConditionTrue, "Denied", msg, now)
	out, err := s.writeStatus(ctx, r)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			err = &Error{Key: "conflict", Msg: fmt.Sprintf("unblock request %s/%s changed while it was denied", ns, name), Hint: "read it again: another administrator may have decided it", Err: err}
		}
		return nil, fmt.Errorf("deny %s/%s: %w", ns, name, err)
	}
	s.log.Info("unblock request denied", "request", ns+"/"+name, "domain", r.Spec.Domain, "by", by)
	return out, nil
}

// Expire moves a pending request past its expiry to expired.
func Expire(ctx context.Context, st store.Store, r *v1alpha1.UnblockRequest, now time.Time) (*v1alpha1.UnblockRequest, error) {
	r = r.DeepCopy()
	r.Status.Phase = PhaseExpired
	msg := "no decision before it expired"
	if r.Status.ExpiresAt != nil {
		msg += " at " + r.Status.ExpiresAt.UTC().Format(time.RFC3339)
	}
	setReady(&r.Status, metav1.ConditionFalse, "Expired", msg, now)
	return WriteStatus(ctx, st, r)
}

// EndApproval ends a timed approval: its allow entries leave the list,
// then the request is expired.
func EndApproval(ctx context.Context, st store.Store, r *v1alpha1.UnblockRequest, now time.Time) (*v1alpha1.UnblockRequest, error) {
	ref := r.Namespace + "/" + r.Name
	if r.Status.Entry != "" {
		if err := RemoveEntries(ctx, st, r.Status.Entry, ref); err != nil {
			return nil, err
		}
	}
	r = r.DeepCopy()
	r.Status.Phase = PhaseExpired
	msg := "the approval ended"
	if r.Status.ExpiresAt != nil {
		msg += " at " + r.Status.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if r.Status.Entry != "" {
		msg += "; its allow entries were removed from " + r.Status.Entry
	}
	setReady(&r.Status, metav1.ConditionFalse, "Expired", msg, now)
	return WriteStatus(ctx, st, r)
}

// checkGroups refuses ClientGroups that do not exist, with the nearest names.
func (s *Service) checkGroups(ctx context.Context, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	all, err := store.ListTyped[v1alpha1.ClientGroup](ctx, s.st, kindClientGroup, "")
	if err != nil {
		return err
	}
	have := map[string]bool{}
	var names []string
	for _, g := range all {
		k := g.Namespace + "/" + g.Name
		have[k] = true
		names = append(names, k)
	}
	for _, g := range groups {
		if !have[g] {
			return invalidHint("name an existing ClientGroup ('svc get clientgroups -A')", "groups: ClientGroup %s does not exist%s", g, suggest.DidYouMean(g, names))
		}
	}
	return nil
}

// addEntries writes the plan's entries into its list, creating the list
// when it is missing.
func (s *Service) addEntries(ctx context.Context, ns string, p Plan) error {
	ents := make([]any, 0, len(p.Entries))
	for i := range p.Entries {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p.Entries[i])
		if err != nil {
			return fmt.Errorf("encode entry: %w", err)
		}
		ents = append(ents, m)
	}
	return mutate(ctx, s.st, kindBlockList, ns, p.List, func(u *unstructured.Unstructured, created bool) error {
		if created {
			u.Object["spec"] = map[string]any{
				"mode":    "allow",
				"sources": []any{map[string]any{"name": SourceName, "entries": ents}},
			}
			if !p.Global {
				_ = unstructured.SetNestedField(u.Object, false, "spec", "global")
			}
			u.SetLabels(map[string]string{"service.io/unblock": "true"})
			return nil
		}
		if mode, _, _ := unstructured.NestedString(u.Object, "spec", "mode"); mode != "allow" {
			return invalidHint("rename that list or set its spec.mode to allow", "BlockList %s/%s exists and is not an allow list: approvals write their entries there", ns, p.List)
		}
		if !p.Global {
			// entries for some groups must never reach everyone
			_ = unstructured.SetNestedField(u.Object, false, "spec", "global")
		}
		srcs, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
		idx := -1
		for i, v := range srcs {
			if m, ok := v.(map[string]any); ok && m["name"] == SourceName {
				idx = i
			}
		}
		if idx < 0 {
			srcs = append(srcs, map[string]any{"name": SourceName})
			idx = len(srcs) - 1
		}
		src := srcs[idx].(map[string]any)
		have, _ := src["entries"].([]any)
		if len(have)+len(ents) > MaxSourceEntries {
			return invalidHint("remove old unblock entries from the list, or approve for everyone",
				"BlockList %s/%s source %s holds %d entries; at most %d", ns, p.List, SourceName, len(have), MaxSourceEntries)
		}
		src["entries"] = append(have, ents...)
		srcs[idx] = src
		return unstructured.SetNestedSlice(u.Object, srcs, "spec", "sources")
	})
}

// RemoveEntries removes every entry of the request ref ("namespace/name")
// from list ("namespace/name"); a missing list has none.
func RemoveEntries(ctx context.Context, st store.Store, list, ref string) error {
	ns, name, ok := strings.Cut(list, "/")
	if !ok {
		return fmt.Errorf("allow list %q: expected namespace/name", list)
	}
	err := mutate(ctx, st, kindBlockList, ns, name, func(u *unstructured.Unstructured, created bool) error {
		if created {
			return errNothing
		}
		srcs, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
		removed := 0
		for i, v := range srcs {
			src, ok := v.(map[string]any)
			if !ok {
				continue
			}
			have, _ := src["entries"].([]any)
			keep := have[:0:0]
			for _, e := range have {
				if m, ok := e.(map[string]any); ok && m["request"] == ref && m["origin"] == OriginUnblock {
					removed++
					continue
				}
				keep = append(keep, e)
			}
			if len(keep) == 0 {
				delete(src, "entries")
			} else {
				src["entries"] = keep
			}
			srcs[i] = src
		}
		if removed == 0 {
			return errNothing
		}
		return unstructured.SetNestedSlice(u.Object, srcs, "spec", "sources")
	})
	if errors.Is(err, errNothing) {
		return nil
	}
	return err
}

// errNothing stops a mutation that has nothing to write.
var errNothing = errors.New("nothing to change")

// attach names the plan's list in the allowListRefs of its policies and
// returns "namespace/name" of each.
func (s *Service) attach(ctx context.Context, ns string, p Plan) ([]string, error) {
	var out []string
	for _, pol := range p.Attach {
		err := mutate(ctx, s.st, kindPolicy, ns, pol, func(u *unstructured.Unstructured, created bool) error {
			if created {
				return fmt.Errorf("policy %s/%s: %w", ns, pol, store.ErrNotFound)
			}
			refs, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "allowListRefs")
			if slices.Contains(refs, p.List) || slices.Contains(refs, ns+"/"+p.List) {
				return errNothing
			}
			return unstructured.SetNestedStringSlice(u.Object, append(refs, p.List), "spec", "allowListRefs")
		})
		if err != nil && !errors.Is(err, errNothing) {
			return nil, fmt.Errorf("attach allow list %s/%s to policy %s/%s: %w", ns, p.List, ns, pol, err)
		}
		out = append(out, ns+"/"+pol)
	}
	return out, nil
}

// mutate reads an object (or starts a new one), changes it and writes it
// with the read version as precondition, again when another writer won.
// The write is the API's (manager api): an object another manager owns
// (a file, an integration) is refused with *store.ManagedByError.
func mutate(ctx context.Context, st store.Store, kind, ns, name string, change func(u *unstructured.Unstructured, created bool) error) error {
	var err error
	for range writeAttempts {
		var u *unstructured.Unstructured
		u, err = st.Get(ctx, kind, ns, name)
		created := false
		switch {
		case errors.Is(err, store.ErrNotFound):
			created = true
			u = &unstructured.Unstructured{Object: map[string]any{}}
			u.SetAPIVersion(v1alpha1.GroupVersion.String())
			u.SetKind(kind)
			u.SetNamespace(ns)
			u.SetName(name)
		case err != nil:
			return fmt.Errorf("read %s %s/%s: %w", kind, ns, name, err)
		}
		if err := change(u, created); err != nil {
			return err
		}
		_, err = st.Apply(ctx, u, store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: u.GetResourceVersion()})
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrPrecondition) && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("write %s %s/%s: %w", kind, ns, name, err)
		}
	}
	return fmt.Errorf("write %s %s/%s: other writers won %d times: %w", kind, ns, name, writeAttempts, err)
}

// InitPending gives a pending request written without the service (kubectl,
// POST /apply) its expiry and Ready condition.
func InitPending(ctx context.Context, st store.Store, r *v1alpha1.UnblockRequest, expires, now time.Time) (*v1alpha1.UnblockRequest, error) {
	r = r.DeepCopy()
	exp := metav1.NewTime(expires.UTC().Truncate(time.Second))
	r.Status.Phase, r.Status.ExpiresAt = PhasePending, &exp
	if r.Status.Submissions == 0 {
		r.Status.Submissions = 1
	}
	setReady(&r.Status, metav1.ConditionFalse, "Pending", "waiting for a decision until "+exp.UTC().Format(time.RFC3339), now)
	return WriteStatus(ctx, st, r)
}
