package kubeauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Group is the API group SubjectAccessReviews ask about.
const Group = "service.io"

// Decision cache lifetimes.
const (
	AllowTTL = 2 * time.Minute
	DenyTTL  = 30 * time.Second
)

// ErrModeUnsupported refuses auth.kubernetes.mode values other than sar.
var ErrModeUnsupported = errors.New("auth.kubernetes.mode: only sar is supported (impersonate is not)")

// Decision is an authorization answer.
type Decision struct {
	Allowed bool
	// Reason explains a denial (the apiserver's reason, or the outage).
	Reason string
}

// AuthorizerOptions configure NewAuthorizer.
type AuthorizerOptions struct {
	// Mode is auth.kubernetes.mode: "sar" (or empty); "impersonate" is refused.
	Mode string
	Now  func() time.Time
}

// Authorizer asks SubjectAccessReview whether a Kubernetes identity holds a
// permission ("resource.verb"): resource attributes group service.io, the
// permission's resource and verb, and the zone as name for zone-scoped checks.
type Authorizer struct {
	cs    kubernetes.Interface
	now   func() time.Time
	mu    sync.Mutex
	cache map[[32]byte]cachedDecision
}

type cachedDecision struct {
	d       Decision
	expires time.Time
}

// NewAuthorizer returns an authorizer using cfg's credentials.
func NewAuthorizer(cfg *rest.Config, opts AuthorizerOptions) (*Authorizer, error) {
	if opts.Mode != "" && opts.Mode != "sar" {
		return nil, fmt.Errorf("%w: %q", ErrModeUnsupported, opts.Mode)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: client: %w", err)
	}
	return &Authorizer{cs: cs, now: opts.Now, cache: map[[32]byte]cachedDecision{}}, nil
}

// Authorize decides whether id holds permission (e.g. "dnszones.read") on
// zone (empty: cluster-wide). Allows are cached 2 minutes, denials 30
// seconds; when the apiserver cannot answer the request is denied with a
// reason and nothing is cached.
func (a *Authorizer) Authorize(ctx context.Context, id Identity, permission, zone string) Decision {
	resource, verb, ok := strings.Cut(permission, ".")
	if !ok || resource == "" || verb == "" {
		return Decision{Reason: fmt.Sprintf("malformed permission %q", permission)}
	}
	h := sha256.New()
	for _, s := range append([]string{id.Username, id.UID, resource, verb, zone}, id.Groups...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var key [32]byte
	copy(key[:], h.Sum(nil))
	now := a.now()
	a.mu.Lock()
	if c, ok := a.cache[key]; ok && now.Before(c.expires) {
		a.mu.Unlock()
		return c.d
	}
	a.mu.Unlock()

	sar, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   id.Username,
			UID:    id.UID,
			Groups: id.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: Group, Resource: resource, Verb: verb, Name: zone,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return Decision{Reason: "subjectaccessreview unavailable: " + err.Error()}
	}
	d := Decision{Allowed: sar.Status.Allowed && !sar.Status.Denied, Reason: sar.Status.Reason}
	ttl := DenyTTL
	if d.Allowed {
		ttl = AllowTTL
	}
	a.mu.Lock()
	if len(a.cache) >= maxEntries {
		clear(a.cache)
	}
	a.cache[key] = cachedDecision{d: d, expires: now.Add(ttl)}
	a.mu.Unlock()
	return d
}
