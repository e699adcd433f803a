package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/verdicts"
)

// Cache lifetimes of bearer verdicts.
const (
	// AcceptTTL caps how long an accepted token's identity is reused; never
	// past the token's exp.
	AcceptTTL = 15 * time.Minute
	// RejectTTL is how long a rejected token is refused without asking again.
	RejectTTL = 10 * time.Second
	// maxCached bounds the verdict cache.
	maxCached = 10000
	// objectsEvery is how often IdentityProvider objects are re-read.
	objectsEvery = 10 * time.Second
)

// ObjectSource lists IdentityProvider objects (specs with id; the id
// defaults to the object's name) and diagnoses of objects it could not read.
type ObjectSource func(ctx context.Context) ([]Spec, []string, error)

// Set holds the configured providers: those of auth.identityProviders and,
// with an ObjectSource, IdentityProvider objects. It is the REST API's
// bearer authenticator for ID tokens: a JWT whose unverified iss is exactly
// a provider's issuer goes to that provider; any other passes on.
type Set struct {
	opts Options
	hc   *http.Client

	mu      sync.Mutex
	config  []*Provider
	objects []*Provider
	objSrc  ObjectSource
	objAt   time.Time
	objDiag []string
	cache   *verdicts.Cache[Identity]
}

// NewSet returns the providers of specs (already validated by DecodeSpecs).
func NewSet(specs []Spec, opts Options) (*Set, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Set{opts: opts, cache: verdicts.New[Identity](AcceptTTL, RejectTTL, maxCached)}
	s.hc = boundedClient(opts.HTTPClient)
	seen := map[string]bool{}
	for _, sp := range specs {
		if err := Validate(sp); err != nil {
			return nil, fmt.Errorf("identity provider %q: %w", sp.ID, err)
		}
		if seen[sp.ID] || seen["iss "+sp.IssuerURL] {
			return nil, fmt.Errorf("identity provider %q: duplicate id or issuer", sp.ID)
		}
		seen[sp.ID], seen["iss "+sp.IssuerURL] = true, true
		s.config = append(s.config, newProvider(sp, "config", &s.opts, s.hc))
	}
	return s, nil
}

// SetObjectSource makes the set read IdentityProvider objects (at most every
// 10 s). Objects whose id or issuer a configured provider already uses are
// ignored with a diagnosis.
func (s *Set) SetObjectSource(src ObjectSource) {
	s.mu.Lock()
	s.objSrc, s.objAt = src, time.Time{}
	s.mu.Unlock()
}

// sync re-reads the objects when due.
func (s *Set) sync(ctx context.Context) {
	s.mu.Lock()
	src := s.objSrc
	now := s.opts.Now()
	due := src != nil && (s.objAt.IsZero() || now.Sub(s.objAt) >= objectsEvery || now.Before(s.objAt))
	if due {
		s.objAt = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	specs, diag, err := src(ctx)
	if err != nil {
		s.opts.Logger.Warn("oidc: reading IdentityProvider objects", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used := map[string]string{}
	for _, p := range s.config {
		used[p.ID()] = "auth.identityProviders"
		used["iss "+p.IssuerURL()] = "auth.identityProviders"
	}
	old := map[string]*Provider{}
	for _, p := range s.objects {
		old[p.ID()] = p
	}
	var next []*Provider
	for _, sp := range specs {
		if err := Validate(sp); err != nil {
			diag = append(diag, fmt.Sprintf("IdentityProvider %s ignored: %v", sp.ID, err))
			continue
		}
		if by, dup := used[sp.ID]; dup {
			diag = append(diag, fmt.Sprintf("IdentityProvider %s ignored: id already used by %s", sp.ID, by))
			continue
		}
		if by, dup := used["iss "+sp.IssuerURL]; dup {
			diag = append(diag, fmt.Sprintf("IdentityProvider %s ignored: issuer %s already used by %s", sp.ID, sp.IssuerURL, by))
			continue
		}
		used[sp.ID], used["iss "+sp.IssuerURL] = "IdentityProvider "+sp.ID, "IdentityProvider "+sp.ID
		if p, ok := old[sp.ID]; ok && reflect.DeepEqual(p.Spec(), sp) {
			next = append(next, p) // keeps its discovery
			continue
		}
		next = append(next, newProvider(sp, "object", &s.opts, s.hc))
	}
	if !reflect.DeepEqual(ids(next), ids(s.objects)) || len(next) != len(s.objects) {
		// A removed or changed provider must not keep accepting tokens
		// through the verdict cache.
		s.cache.Clear()
	} else {
		for i := range next {
			if next[i] != s.objects[i] {
				s.cache.Clear()
				break
			}
		}
	}
	s.objects, s.objDiag = next, diag
}

func ids(ps []*Provider) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.ID())
	}
	return out
}

// List returns the providers, configured ones first, then objects by id.
func (s *Set) List(ctx context.Context) []*Provider {
	if s == nil {
		return nil
	}
	s.sync(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	objs := append([]*Provider(nil), s.objects...)
	sort.Slice(objs, func(i, j int) bool { return objs[i].ID() < objs[j].ID() })
	return append(append([]*Provider(nil), s.config...), objs...)
}

// Get returns the provider with id, or nil.
func (s *Set) Get(ctx context.Context, id string) *Provider {
	for _, p := range s.List(ctx) {
		if p.ID() == id {
			return p
		}
	}
	return nil
}

// Diagnoses are the problems of the providers: objects ignored, discovery
// failing, client secrets unreadable.
func (s *Set) Diagnoses(ctx context.Context) []string {
	ps := s.List(ctx)
	s.mu.Lock()
	out := append([]string(nil), s.objDiag...)
	s.mu.Unlock()
	for _, p := range ps {
		for _, d := range p.Check(ctx) {
			out = append(out, "identity provider "+p.ID()+": "+d)
		}
	}
	return out
}

func (s *Set) byIssuer(ctx context.Context, iss string) *Provider {
	for _, p := range s.List(ctx) {
		if p.IssuerURL() == iss {
			return p
		}
	}
	return nil
}

// AuthenticateBearer implements the REST API's bearer authenticator: a
// compact JWT whose iss is a provider's issuer is claimed and verified;
// everything else passes on.
func (s *Set) AuthenticateBearer(ctx context.Context, token string) (*auth.Principal, bool, error) {
	var c struct {
		Iss string `json:"iss"`
	}
	payload := jwtPayload(token)
	if payload == nil || json.Unmarshal(payload, &c) != nil || c.Iss == "" {
		return nil, false, nil
	}
	p := s.byIssuer(ctx, c.Iss)
	if p == nil {
		return nil, false, nil
	}
	id, err := s.Verify(ctx, p, token)
	if err != nil {
		return nil, true, err
	}
	return id.Principal("token"), true, nil
}

// Verify checks a bearer ID token of p. Verdicts are cached by
// sha256(token): accepted ones until min(exp, 15 minutes), rejections for
// 10 s; an outage is not a verdict and is not cached.
func (s *Set) Verify(ctx context.Context, p *Provider, token string) (Identity, error) {
	key := verdicts.Key(token)
	now := s.opts.Now()
	ofP := func(id Identity, err error) bool { return err != nil || id.Provider == p.ID() }
	if id, err, ok := s.cache.Get(key, now, ofP); ok {
		return id, err
	}
	id, err := p.verify(ctx, token, modeBearer)
	if err != nil && !errors.Is(err, ErrRejected) {
		s.opts.Logger.Warn("oidc: bearer token not verified", "provider", p.ID(), "err", err)
		return Identity{}, err
	}
	if err != nil {
		s.opts.Logger.Info("oidc: bearer token rejected", "provider", p.ID(), "reason", err)
	}
	s.cache.Put(key, id, err, id.Expiry, now)
	return id, err
}

// cached reports how many verdicts came from the cache (tests).
func (s *Set) cached() int { return s.cache.Hits() }
