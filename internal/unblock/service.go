package unblock

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
)

// Kind is the store kind of unblock requests.
const Kind = "UnblockRequest"

// Phases of an UnblockRequest (status.phase).
const (
	PhasePending  = "pending"
	PhaseApproved = "approved"
	PhaseDenied   = "denied"
	PhaseExpired  = "expired"
)

// Phases lists every phase, in the order the metrics and docs show them.
var Phases = []string{PhasePending, PhaseApproved, PhaseDenied, PhaseExpired}

// ClientLabel carries a hash of the requesting client (address and client
// ID), so a repeat submission finds its pending request without reading
// every request.
const ClientLabel = "service.io/unblock-client"

// Bounds of what a submission carries (the CRD's limits).
const (
	MaxReason    = 1000
	MaxRequester = 254
	MaxRule      = 1024
)

// DefaultNamespace holds requests whose deciding policy is unknown (the
// implicit global policy, or a block page that could not tell).
const DefaultNamespace = "default"

// Service files, lists and decides unblock requests over the store. It is
// the real Submitter of the block page:
//
//	svc := unblock.NewService(st, func() settings.UnblockRequests { return hot.current().UnblockRequests }, time.Now)
//	res, err := svc.Submit(ctx, unblock.Submission{Domain: "ads.example.com", Client: addr, ...})
//
// Submit answers ErrDisabled, ErrTooManyPending, a *RateLimitedError (429
// with Retry-After) or an error wrapping ErrInvalid (a bad domain or an
// over-long reason: show its message). One Service per process: the
// per-client rate limit is kept in memory (per node).
type Service struct {
	st     store.Store
	cfg    func() settings.UnblockRequests
	now    func() time.Time
	log    *slog.Logger
	limits *limiter
	// decide serialises this node's approvals: a missing allow list is
	// created by a write without a version to check, which two approvals
	// at once would each make, the second replacing the first's entries.
	decide sync.Mutex
	// DefaultNamespace overrides DefaultNamespace (the namespace of requests
	// without a deciding policy).
	DefaultNamespace string
}

// NewService returns the unblock request service. cfg is read on every
// call, so settings changes apply at once; now is the clock (time.Now;
// tests inject theirs).
func NewService(st store.Store, cfg func() settings.UnblockRequests, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{st: st, cfg: cfg, now: now, log: slog.Default(), limits: newLimiter(), DefaultNamespace: DefaultNamespace}
}

// WithLogger sets the logger (default slog.Default()).
func (s *Service) WithLogger(l *slog.Logger) *Service {
	if l != nil {
		s.log = l
	}
	return s
}

var _ Submitter = (*Service)(nil)

// Submit files an unblock request for a blocked name, or merges it into
// the pending request of the same domain and client.
func (s *Service) Submit(ctx context.Context, sub Submission) (Result, error) {
	cfg := s.cfg()
	if !cfg.Enabled {
		return Result{}, ErrDisabled
	}
	domain, err := NormalizeDomain(sub.Domain)
	if err != nil {
		return Result{}, err
	}
	reason, err := cleanText("reason", sub.Reason, MaxReason)
	if err != nil {
		return Result{}, err
	}
	requester, err := cleanText("name or e-mail", sub.Requester, MaxRequester)
	if err != nil {
		return Result{}, err
	}
	requester = strings.Join(strings.Fields(requester), " ")
	if !sub.Client.IsValid() {
		return Result{}, invalid("the client address is missing")
	}
	client := sub.Client.Unmap()
	now := s.now()
	if sub.At.IsZero() {
		sub.At = now
	}
	if wait := s.limits.take(RateKey(client), cfg.RateLimit, now); wait > 0 {
		return Result{}, &RateLimitedError{RetryAfter: wait}
	}
	ns := sub.Namespace
	if ns == "" {
		ns = s.DefaultNamespace
	}
	hash := clientHash(client, sub.ClientID)
	if res, ok, err := s.merge(ctx, ns, hash, domain, sub, now); err != nil || ok {
		return res, err
	}
	pending, err := s.countPending(ctx)
	if err != nil {
		return Result{}, err
	}
	if cfg.MaxPending > 0 && pending >= cfg.MaxPending {
		return Result{}, ErrTooManyPending
	}
	name := requestName(domain)
	req := &v1alpha1.UnblockRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{ClientLabel: hash}},
		Spec: v1alpha1.UnblockRequestSpec{
			Domain: domain, Reason: reason, List: clip(sub.List, 300), Policy: clip(sub.Policy, 300), Rule: clip(sub.Rule, MaxRule),
			Requester: &v1alpha1.Requester{IP: client.String(), ClientID: clip(sub.ClientID, 253), Contact: requester},
		},
	}
	u, err := toUnstructured(req)
	if err != nil {
		return Result{}, err
	}
	res, err := s.st.Apply(ctx, u, store.ApplyOptions{Manager: store.ManagerAPI})
	if err != nil {
		return Result{}, fmt.Errorf("file unblock request for %s: %w", domain, err)
	}
	created, err := fromUnstructured(res.Object)
	if err != nil {
		return Result{}, err
	}
	exp := metav1.NewTime(now.Add(cfg.PendingExpiry).UTC().Truncate(time.Second))
	at := metav1.NewTime(sub.At.UTC().Truncate(time.Second))
	created.Status = v1alpha1.UnblockRequestStatus{Phase: PhasePending, ExpiresAt: &exp, Submissions: 1, LastSubmittedAt: &at}
	setReady(&created.Status, metav1.ConditionFalse, "Pending", "waiting for a decision until "+exp.UTC().Format(time.RFC3339), now)
	// A conflict is the reconciler initialising the new request first (its
	// Init writes the same pending phase and an expiry from the creation
	// time): the request is filed; write what only the submission knows
	// (when it was filed) over the fresh copy, a few times at most.
	for attempt := 0; ; attempt++ {
		_, err := s.writeStatus(ctx, created)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			return Result{}, fmt.Errorf("file unblock request for %s: %w", domain, err)
		}
		cur, gerr := s.Get(ctx, ns, name)
		if attempt >= 3 || gerr != nil || phaseOf(cur) != PhasePending || cur.Status.LastSubmittedAt != nil {
			break
		}
		cur.Status.LastSubmittedAt, cur.Status.Submissions = &at, max(cur.Status.Submissions, 1)
		created = cur
	}
	s.log.Info("unblock request filed", "request", ns+"/"+name, "domain", domain, "policy", sub.Policy)
	return Result{Namespace: ns, Name: name}, nil
}

// merge folds a submission into the pending request of the same domain and
// client in ns, if there is one.
func (s *Service) merge(ctx context.Context, ns, hash, domain string, sub Submission, now time.Time) (Result, bool, error) {
	sel := labels.SelectorFromSet(labels.Set{ClientLabel: hash})
	page, err := s.st.List(ctx, store.ListOptions{Kind: Kind, Namespace: ns, Selector: sel})
	if err != nil {
		return Result{}, false, fmt.Errorf("list unblock requests: %w", err)
	}
	for _, u := range page.Items {
		r, err := fromUnstructured(u)
		if err != nil || r.Spec.Domain != domain || phaseOf(r) != PhasePending {
			continue
		}
		if r.Spec.Requester == nil || r.Spec.Requester.IP != sub.Client.Unmap().String() {
			continue // a hash collision: not the same client
		}
		r.Status.Submissions = max(r.Status.Submissions, 1) + 1
		at := metav1.NewTime(sub.At.UTC().Truncate(time.Second))
		r.Status.LastSubmittedAt = &at
		if _, err := s.writeStatus(ctx, r); err != nil {
			if errors.Is(err, store.ErrConflict) {
				// decided or merged meanwhile: the submission is not lost, it
				// is the same request
				return Result{Namespace: r.Namespace, Name: r.Name, Merged: true}, true, nil
			}
			return Result{}, false, fmt.Errorf("merge into unblock request %s/%s: %w", r.Namespace, r.Name, err)
		}
		return Result{Namespace: r.Namespace, Name: r.Name, Merged: true}, true, nil
	}
	return Result{}, false, nil
}

// countPending counts pending requests in every namespace.
func (s *Service) countPending(ctx context.Context) (int, error) {
	all, err := s.listAll(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range all {
		if phaseOf(&all[i]) == PhasePending {
			n++
		}
	}
	return n, nil
}

// listAll reads every request of ns ("" = every namespace).
func (s *Service) listAll(ctx context.Context, ns string) ([]v1alpha1.UnblockRequest, error) {
	var out []v1alpha1.UnblockRequest
	opts := store.ListOptions{Kind: Kind, Namespace: ns, Limit: 500}
	for range 10000 {
		page, err := s.st.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list unblock requests: %w", err)
		}
		for _, u := range page.Items {
			r, err := fromUnstructured(u)
			if err != nil {
				return nil, err
			}
			out = append(out, *r)
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	return out, nil
}

// writeStatus writes r's status with r's resourceVersion as precondition.
func (s *Service) writeStatus(ctx context.Context, r *v1alpha1.UnblockRequest) (*v1alpha1.UnblockRequest, error) {
	return WriteStatus(ctx, s.st, r)
}

// WriteStatus writes r's status (store.ErrConflict when r is stale).
func WriteStatus(ctx context.Context, st store.Store, r *v1alpha1.UnblockRequest) (*v1alpha1.UnblockRequest, error) {
	u, err := toUnstructured(r)
	if err != nil {
		return nil, err
	}
	out, err := st.UpdateStatus(ctx, u)
	if err != nil {
		return nil, err
	}
	return fromUnstructured(out)
}

// domainRE is the UnblockRequest CRD's domain pattern (the exact-name rule
// of BlockList entries: letters, digits, '-' and '_', labels up to 63).
var domainRE = regexp.MustCompile(`^([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$`)

// NormalizeDomain lower-cases a name, drops one trailing dot and checks it
// is a name an exact BlockList entry can hold.
func NormalizeDomain(d string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
	switch {
	case n == "":
		return "", invalid("domain: empty; expected the blocked name, e.g. ads.example.com")
	case len(n) > 253:
		return "", invalid("domain: %d characters; a name has at most 253", len(n))
	case !domainRE.MatchString(n):
		return "", invalid("domain %q: not a domain name; expected letters, digits, '-' and '_' in dot-separated labels of 1 to 63 characters, e.g. ads.example.com", clip(n, 100))
	}
	return n, nil
}

// cleanText refuses invalid UTF-8 and over-long text, and drops control
// characters other than newlines and tabs.
func cleanText(field, s string, maxRunes int) (string, error) {
	if !utf8.ValidString(s) {
		return "", invalid("%s: not valid UTF-8", field)
	}
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, s))
	if n := utf8.RuneCountInString(s); n > maxRunes {
		return "", invalid("%s: %d characters; at most %d", field, n, maxRunes)
	}
	return s, nil
}

// clip bounds s to n bytes without splitting a character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// RateKey is what the per-client rate limit counts by: the IPv4 address,
// or the IPv6 /64 (one household or host usually holds a whole /64).
func RateKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

func clientHash(a netip.Addr, clientID string) string {
	h := sha256.Sum256([]byte(a.Unmap().String() + "\x00" + clientID))
	return hex.EncodeToString(h[:8])
}

// requestName derives a readable, unique object name from the domain:
// "ads.example.com-3f9a1c0b" (DNS-1123: '_' becomes '-', at most 253).
func requestName(domain string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	base := strings.ReplaceAll(domain, "_", "x")
	base = clip(base, 200)
	base = strings.Trim(base, ".-")
	if base == "" {
		base = "request"
	}
	return base + "-" + hex.EncodeToString(b[:])
}

func phaseOf(r *v1alpha1.UnblockRequest) string {
	if r.Status.Phase == "" {
		return PhasePending
	}
	return r.Status.Phase
}

// Phase is the request's phase (an unset phase is pending).
func Phase(r *v1alpha1.UnblockRequest) string { return phaseOf(r) }

func toUnstructured(r *v1alpha1.UnblockRequest) (*unstructured.Unstructured, error) {
	r.APIVersion, r.Kind = v1alpha1.GroupVersion.String(), Kind
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, fmt.Errorf("encode UnblockRequest %s/%s: %w", r.Namespace, r.Name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func fromUnstructured(u *unstructured.Unstructured) (*v1alpha1.UnblockRequest, error) {
	var r v1alpha1.UnblockRequest
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("decode UnblockRequest %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &r, nil
}

// FromUnstructured decodes a stored UnblockRequest.
func FromUnstructured(u *unstructured.Unstructured) (*v1alpha1.UnblockRequest, error) {
	return fromUnstructured(u)
}

// setReady sets the Ready condition, keeping its transition time when the
// status does not change.
func setReady(st *v1alpha1.UnblockRequestStatus, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	SetCondition(&st.Conditions, "Ready", status, reason, msg, now)
}

// SetCondition sets one condition by type.
func SetCondition(conds *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	msg = clip(msg, 1000)
	for i := range *conds {
		c := &(*conds)[i]
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return
	}
	*conds = append(*conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second))})
}

// limiter is a sliding one-hour window of submissions per rate key.
type limiter struct {
	mu   sync.Mutex
	hits map[string][]time.Time
}

// maxLimiterKeys bounds the limiter's memory: beyond it, keys whose
// window is over are dropped first, then the whole map (a flood of
// distinct addresses must not grow memory without bound).
const maxLimiterKeys = 100000

func newLimiter() *limiter { return &limiter{hits: map[string][]time.Time{}} }

// take records a submission of key when fewer than limit happened in the
// last hour and returns 0; otherwise it returns how long until one more
// is allowed. limit <= 0 means no limit.
func (l *limiter) take(key string, limit int, now time.Time) time.Duration {
	if limit <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	window := now.Add(-time.Hour)
	hs := l.hits[key]
	i := 0
	for i < len(hs) && !hs[i].After(window) {
		i++
	}
	hs = hs[i:]
	if len(hs) >= limit {
		l.hits[key] = hs
		return hs[len(hs)-limit].Add(time.Hour).Sub(now)
	}
	if len(l.hits) >= maxLimiterKeys {
		for k, v := range l.hits {
			if len(v) == 0 || !v[len(v)-1].After(window) {
				delete(l.hits, k)
			}
		}
		if len(l.hits) >= maxLimiterKeys {
			clear(l.hits)
		}
	}
	l.hits[key] = append(hs, now)
	return 0
}
