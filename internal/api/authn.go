package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// authenticate runs the authenticator chain: bearer svc_ token, bearer JWT
// authenticators, session cookie, Unix peer, internal token. It never
// refuses an anonymous request (routes decide) but answers a rejected
// bearer credential with 401.
func (s *Server) authenticate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		st := state(ctx)
		internal := false
		if authz := r.Header.Get("Authorization"); authz != "" {
			scheme, tok, _ := strings.Cut(authz, " ")
			if strings.EqualFold(scheme, "Bearer") {
				tok = strings.TrimSpace(tok)
				p, err := s.bearer(ctx, tok, st.clientIP)
				switch {
				case err == nil:
					st.principal = p
					h.ServeHTTP(w, r)
					return
				case errors.Is(err, errUnclaimed) && s.internalToken(tok):
					// Step 5: decided after the cookie and the Unix peer.
					internal = true
				default:
					// One answer for every failure: unknown id, wrong secret,
					// malformed, expired, disabled owner.
					writeError(w, r, errUnauthenticated())
					return
				}
			}
		}
		if c := s.sessionCookie(r); c != nil {
			s.cookieAuth(ctx, w, r, st, c.Value)
		}
		if st.principal == nil && peerAdmitted(ctx) {
			st.peerAdmin = true
			st.principal = &auth.Principal{Kind: "User", ID: "local-root", Name: "local-root", Provider: "unix",
				AuthMethod: "socket", BuiltinAdmin: true}
		}
		if st.principal == nil && internal {
			st.principal = nodePrincipal()
		}
		h.ServeHTTP(w, r)
	})
}

// nodePrincipal is who the internal token acts as: a node (or the edge
// balancer) reading what peers read, with implicit viewer and auditor grants.
func nodePrincipal() *auth.Principal {
	return &auth.Principal{Kind: "Node", ID: "node:internal", Name: "node", Provider: "internal", AuthMethod: "internal-token",
		ImplicitGrants: []auth.Grant{{Role: auth.RoleViewer, Scope: auth.ClusterScope}, {Role: auth.RoleAuditor, Scope: auth.ClusterScope}}}
}

// internalToken compares tok with the internal token in constant time
// (over SHA-256 digests, so the length leaks nothing either).
func (s *Server) internalToken(tok string) bool {
	if s.opts.InternalToken == "" || tok == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(s.opts.InternalToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// errUnclaimed: no bearer authenticator recognised the token (it may still
// be the internal token).
var errUnclaimed = errors.New("no authenticator claims the bearer token")

func (s *Server) bearer(ctx context.Context, tok, ip string) (*auth.Principal, error) {
	if strings.HasPrefix(tok, auth.TokenPrefix) {
		return s.tokenAuth(ctx, tok, ip)
	}
	for _, b := range s.deps.Bearer {
		p, claimed, err := b.AuthenticateBearer(ctx, tok)
		if claimed {
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	}
	return nil, errUnclaimed
}

var errBadToken = errors.New("invalid token")

func (s *Server) tokenAuth(ctx context.Context, tok, ip string) (*auth.Principal, error) {
	id, err := auth.ParseToken(tok)
	if err != nil {
		return nil, errBadToken
	}
	t, err := s.dir.GetToken(ctx, id)
	if err != nil {
		// Unknown ids still pay for a hash comparison.
		auth.TokenMatches(tok, strings.Repeat("0", 64))
		return nil, errBadToken
	}
	if !auth.TokenMatches(tok, t.Hash) {
		return nil, errBadToken
	}
	now := s.clock()
	if t.ExpiresAt != nil && !now.Before(*t.ExpiresAt) {
		return nil, errBadToken
	}
	p := &auth.Principal{AuthMethod: "token", TokenID: t.ID, TokenExpiresAt: t.ExpiresAt, Provider: "local"}
	switch t.Owner.Kind {
	case "User":
		if t.Owner.Provider != "" && t.Owner.Provider != "local" {
			if s.oidcTokenPrincipal(ctx, t, p) != nil {
				return nil, errBadToken
			}
			break
		}
		u, err := s.dir.GetUser(ctx, t.Owner.Name)
		if err != nil || u.Disabled {
			return nil, errBadToken
		}
		// Tokens created before the last revocation of the user's sessions
		// and tokens stay valid; revokeTokens deletes them instead.
		p.Kind, p.ID, p.Name, p.Groups = "User", u.Username, u.Username, u.Groups
		p.BuiltinAdmin, p.MustChangePassword = u.BuiltinAdmin, u.MustChangePassword
	case "ServiceAccount":
		sa, err := s.dir.GetServiceAccount(ctx, t.Owner.Namespace, t.Owner.Name)
		if err != nil || sa.Disabled {
			return nil, errBadToken
		}
		p.Kind, p.Namespace, p.Name = "ServiceAccount", sa.Namespace, sa.Name
		p.ID = "serviceaccount:" + sa.Namespace + ":" + sa.Name
		p.Groups, p.BuiltinAdmin = sa.Groups, sa.BuiltinAdmin
	default:
		return nil, errBadToken
	}
	if len(t.Scopes) > 0 {
		p.Scopes = []auth.Grant{}
		for _, sc := range t.Scopes {
			g, err := auth.ParseGrant(sc)
			if err != nil {
				continue // an unreadable scope grants nothing
			}
			p.Scopes = append(p.Scopes, g)
		}
	}
	if s.touched.due(t.ID, now) {
		if err := s.dir.TouchToken(ctx, t, now, ip); err != nil {
			s.log.Warn("recording token use", "token_id", t.ID, "error", err)
		}
	}
	return p, nil
}

// oidcTokenPrincipal fills p for a token of an OIDC owner: no groups, the
// grants frozen when the token was issued, honoured only while the bindings
// that gave them are unchanged (as for OIDC-login sessions). A token of a
// provider that is no longer configured is refused.
func (s *Server) oidcTokenPrincipal(ctx context.Context, t *auth.Token, p *auth.Principal) error {
	if s.deps.OIDC.Get(ctx, t.Owner.Provider) == nil {
		return errBadToken
	}
	p.Kind, p.ID, p.Name, p.Provider = "User", t.Owner.ID, t.Owner.Name, t.Owner.Provider
	// Non-nil even when empty: nil would mean "not frozen" (live grants).
	p.FrozenGrants, p.FrozenBindings = []auth.Grant{}, append([]string{}, t.FrozenBindings...)
	for _, v := range t.FrozenGrants {
		if g, err := auth.ParseGrant(v); err == nil {
			p.FrozenGrants = append(p.FrozenGrants, g)
		}
	}
	return nil
}

// touchCache limits lastUsed writes to one a minute per token.
type touchCache struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newTouchCache() *touchCache { return &touchCache{last: map[string]time.Time{}} }

func (c *touchCache) due(id string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.last[id]; ok && now.Sub(t) < time.Minute {
		return false
	}
	if len(c.last) > 100000 {
		clear(c.last)
	}
	c.last[id] = now
	return true
}

func (s *Server) sessionCookie(r *http.Request) *http.Cookie {
	for _, n := range []string{"__Host-" + auth.CookieBaseName, auth.CookieBaseName} {
		if c, err := r.Cookie(n); err == nil && c.Value != "" {
			return c
		}
	}
	return nil
}

func (s *Server) cookieAuth(ctx context.Context, w http.ResponseWriter, r *http.Request, st *reqState, value string) {
	sess, err := s.sessions.Decode(value, s.authLimits().SessionIdleTimeout)
	if err != nil {
		return
	}
	if unsafeMethod(r.Method) && (st.crossOriginBad || !s.sessions.CheckCSRF(sess, r.Header.Get("X-Service-CSRF"))) {
		// A CSRF failure drops the session; it is not a 401.
		st.csrfFailed = true
		return
	}
	var p *auth.Principal
	if oidcSession(sess) {
		// OIDC login: no local account; grants frozen at login.
		if p = s.oidcSessionPrincipal(ctx, sess); p == nil {
			return
		}
	} else {
		u, err := s.dir.GetUser(ctx, sess.User)
		if err != nil || u.Disabled || !sess.ValidAfter(u.SessionsValidAfter) {
			return
		}
		p = &auth.Principal{Kind: "User", ID: u.Username, Name: u.Username, Groups: u.Groups, Provider: "local",
			BuiltinAdmin: u.BuiltinAdmin, MustChangePassword: u.MustChangePassword}
	}
	now := s.clock()
	// The idle timeout slides on use; the cookie is re-issued at most once a
	// minute to keep answers cacheable by nothing and cheap.
	if now.Unix()-sess.Seen >= 60 {
		sess.Seen = now.Unix()
		s.setSessionCookie(w, st, sess)
	}
	st.session = &sess
	p.AuthMethod, p.SessionID = "session", sess.ID
	p.SessionExpires = time.Unix(sess.Expires, 0).UTC()
	p.SessionIdle = time.Unix(sess.Seen, 0).Add(s.authLimits().SessionIdleTimeout).UTC()
	st.principal = p
}

func (s *Server) cookieSecure(st *reqState) bool {
	switch s.authLimits().SessionSecure {
	case "true":
		return true
	case "false":
		return false
	}
	return st.secure
}

func (s *Server) cookiePath() string {
	if s.opts.PathPrefix == "" {
		return "/"
	}
	return s.opts.PathPrefix + "/"
}

func (s *Server) setSessionCookie(w http.ResponseWriter, st *reqState, sess auth.Session) {
	secure := s.cookieSecure(st)
	http.SetCookie(w, &http.Cookie{
		Name: auth.CookieName(secure, s.cookiePath()), Value: s.sessions.Encode(sess),
		Path: s.cookiePath(), Expires: time.Unix(sess.Expires, 0), HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteLaxMode,
	})
}

func (s *Server) clearSessionCookie(w http.ResponseWriter, st *reqState) {
	secure := s.cookieSecure(st)
	http.SetCookie(w, &http.Cookie{
		Name: auth.CookieName(secure, s.cookiePath()), Value: "", Path: s.cookiePath(),
		MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	})
}

// bindingCache reads RoleBinding objects and the rbac.bindings setting; the
// objects are cached for a second so that a burst of requests lists once.
type bindingCache struct {
	s *Server

	mu    sync.Mutex
	at    time.Time
	items []auth.Binding
	diag  []string
}

func (c *bindingCache) invalidate() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

func (c *bindingCache) get(ctx context.Context) ([]auth.Binding, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !c.at.IsZero() && now.Sub(c.at) < time.Second {
		return c.items, c.diag, nil
	}
	items := make([]auth.Binding, 0, len(c.s.opts.RBACBindings))
	for _, b := range c.s.opts.RBACBindings {
		b.Source = "config"
		items = append(items, b)
	}
	var diag []string
	var objs []*unstructured.Unstructured
	cont := ""
	for range 1000 {
		res, err := c.s.deps.Store.List(ctx, store.ListOptions{Kind: auth.KindRoleBinding, Limit: 500, Continue: cont})
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, res.Items...)
		if cont = res.Continue; cont == "" {
			break
		}
	}
	for _, o := range objs {
		b := bindingFrom(o)
		if err := auth.ValidateBinding(b); err != nil {
			diag = append(diag, "RoleBinding "+o.GetNamespace()+"/"+o.GetName()+" ignored: "+err.Error())
			continue
		}
		items = append(items, b)
	}
	c.items, c.diag, c.at = items, diag, now
	return items, diag, nil
}

func bindingFrom(o *unstructured.Unstructured) auth.Binding {
	g := func(path ...string) string {
		v, _, _ := unstructured.NestedString(o.Object, path...)
		return v
	}
	b := auth.Binding{
		Name: o.GetNamespace() + "/" + o.GetName(), Source: "object", Role: g("spec", "role"),
		Subject: auth.Subject{Kind: g("spec", "subject", "kind"), Name: g("spec", "subject", "name"), Namespace: g("spec", "subject", "namespace")},
		Scope:   auth.Scope{Kind: g("spec", "scope", "kind"), Name: g("spec", "scope", "name")},
	}
	if b.Scope.Kind == "" {
		b.Scope.Kind = "cluster"
	}
	// A new object (uid) or a changed spec (generation) is another binding
	// for the frozen grants of OIDC-login sessions.
	b.Revision = string(o.GetUID()) + "@" + strconv.FormatInt(o.GetGeneration(), 10)
	return b
}

type peerKey struct{}

func peerAdmitted(ctx context.Context) bool {
	v, _ := ctx.Value(peerKey{}).(bool)
	return v
}
