package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/oidc"
)

// loginCookieBase names the short-lived cookie that carries the sealed
// OIDC login state between /start and /callback; like the session cookie it
// takes the __Host- prefix when Secure with Path=/.
const loginCookieBase = "service_oidc_login"

func loginCookieName(secure bool, path string) string {
	if secure && path == "/" {
		return "__Host-" + loginCookieBase
	}
	return loginCookieBase
}

// setupOIDC prepares the identity providers: the set of Deps.OIDC (or an
// empty one), IdentityProvider objects read from the store, the set first in
// the bearer chain (a JWT of a configured issuer goes to its provider before
// the Kubernetes verifier sees it) and the login state codec.
func (s *Server) setupOIDC() error {
	if s.deps.OIDC == nil {
		set, err := oidc.NewSet(nil, oidc.Options{Logger: s.log.With("component", "oidc"), Now: s.clock})
		if err != nil {
			return err
		}
		s.deps.OIDC = set
	}
	s.deps.OIDC.SetObjectSource(s.identityProviderObjects)
	s.deps.Bearer = append([]BearerAuthenticator{s.deps.OIDC}, s.deps.Bearer...)
	codec, err := oidc.NewStateCodec(s.keys.Derive("oidc-login"), s.keys.DerivePrevious("oidc-login"), s.clock)
	if err != nil {
		return fmt.Errorf("oidc login state: %w", err)
	}
	s.loginStates = codec
	return nil
}

// identityProviderObjects reads IdentityProvider objects; an object whose
// spec does not decode strictly is reported and skipped.
func (s *Server) identityProviderObjects(ctx context.Context) ([]oidc.Spec, []string, error) {
	objs, err := s.listAll(ctx, auth.KindIdentityProv)
	if err != nil {
		return nil, nil, err
	}
	var specs []oidc.Spec
	var diag []string
	for _, o := range objs {
		spec, _, _ := unstructured.NestedMap(o.Object, "spec")
		b, err := json.Marshal(spec)
		if err != nil {
			diag = append(diag, "IdentityProvider "+o.GetName()+" ignored: "+err.Error())
			continue
		}
		var sp oidc.Spec
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sp); err != nil {
			diag = append(diag, "IdentityProvider "+o.GetName()+" ignored: "+err.Error())
			continue
		}
		if sp.ID == "" {
			sp.ID = o.GetName()
		}
		specs = append(specs, sp)
	}
	return specs, diag, nil
}

// startURL is where a browser begins a login through provider id.
func (s *Server) startURL(id string) string {
	return s.BasePath() + "/auth/oidc/" + url.PathEscape(id) + "/start"
}

// authProviders lists the providers for AuthStatus.
func (s *Server) authProviders(ctx context.Context) []AuthProvider {
	out := []AuthProvider{}
	for _, p := range s.deps.OIDC.List(ctx) {
		out = append(out, AuthProvider{ID: p.ID(), DisplayName: p.DisplayName(), StartURL: s.startURL(p.ID())})
	}
	return out
}

// identityProviderInfos lists the providers without secrets.
func (s *Server) identityProviderInfos(ctx context.Context) *AuthListBody[IdentityProviderInfo] {
	out := &AuthListBody[IdentityProviderInfo]{Items: []IdentityProviderInfo{}}
	for _, p := range s.deps.OIDC.List(ctx) {
		sp := p.Spec()
		info := IdentityProviderInfo{ID: p.ID(), DisplayName: p.DisplayName(), IssuerURL: sp.IssuerURL, ClientID: sp.ClientID,
			Source: p.Source(), Audiences: sp.Audiences, UsernameClaim: sp.UsernameClaim, GroupsClaim: sp.GroupsClaim,
			UsernamePrefix: sp.UsernamePrefix, GroupsPrefix: sp.GroupsPrefix, Scopes: sp.Scopes,
			ClientSecretFile: sp.ClientSecretFile, StartURL: s.startURL(p.ID())}
		if r := sp.ClientSecretRef; r != nil {
			info.ClientSecretRef = r.Name + "/" + r.Key
		}
		out.Items = append(out.Items, info)
	}
	out.Diagnoses = s.deps.OIDC.Diagnoses(ctx)
	return out
}

func (s *Server) registerOIDCRoutes() {
	tags := []string{"auth"}
	register(s, huma.Operation{OperationID: "auth-oidc-start", Method: http.MethodGet, Path: "/auth/oidc/{idp}/start",
		Summary: "Log in through an identity provider (browser redirect)", Tags: tags, DefaultStatus: http.StatusFound,
		Description: "Redirects the browser to the provider's authorization endpoint (authorization-code flow with PKCE S256, state and nonce). " +
			"The login state travels in a short-lived encrypted cookie; the provider sends the browser back to /auth/oidc/{idp}/callback.",
		Errors: []int{http.StatusNotFound, http.StatusServiceUnavailable}},
		public(), s.oidcStart)
	register(s, huma.Operation{OperationID: "auth-oidc-callback", Method: http.MethodGet, Path: "/auth/oidc/{idp}/callback",
		Summary: "Finish a login through an identity provider (browser redirect)", Tags: tags, DefaultStatus: http.StatusFound,
		Description: "Checks the state, redeems the code with the PKCE verifier and the client secret, verifies the ID token and its nonce, " +
			"sets the session cookie (grants frozen at login) and redirects to the dashboard or the start's redirect path.",
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusServiceUnavailable}},
		public(), s.oidcCallback)
}

// browserIn carries what the redirect routes read besides parameters: the
// Host the browser used and its cookies.
type browserIn struct {
	host    string
	cookies []*http.Cookie
}

func (b *browserIn) resolve(ctx huma.Context) {
	b.host = ctx.Host()
	var hs []string
	ctx.EachHeader(func(name, value string) {
		if strings.EqualFold(name, "Cookie") {
			hs = append(hs, value)
		}
	})
	b.cookies = (&http.Request{Header: http.Header{"Cookie": hs}}).Cookies()
}

func (b *browserIn) cookie(name string) string {
	for _, c := range b.cookies {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

type oidcStartIn struct {
	IDP      string `path:"idp" maxLength:"63"`
	Redirect string `query:"redirect" maxLength:"2048" doc:"where to send the browser after the login: a path on this origin (default the dashboard root)"`
	browserIn
}

func (in *oidcStartIn) Resolve(ctx huma.Context) []error { in.resolve(ctx); return nil }

type oidcCallbackIn struct {
	IDP              string `path:"idp" maxLength:"63"`
	Code             string `query:"code" maxLength:"4096"`
	State            string `query:"state" maxLength:"512"`
	Error            string `query:"error" maxLength:"256"`
	ErrorDescription string `query:"error_description" maxLength:"2048"`
	browserIn
}

func (in *oidcCallbackIn) Resolve(ctx huma.Context) []error { in.resolve(ctx); return nil }

// redirectOut sends the browser elsewhere.
type redirectOut struct {
	Status    int
	Location  string        `header:"Location"`
	SetCookie []http.Cookie `header:"Set-Cookie"`
}

// safeReturn accepts only a path on this origin ("/x", never "//host" or
// "/\host", no scheme or host).
func safeReturn(v string) bool {
	if !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") || strings.HasPrefix(v, "/\\") ||
		strings.ContainsAny(v, "\\\x00\r\n\t") {
		return false
	}
	u, err := url.Parse(v)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}

// validHost accepts a Host header usable in the redirect URI.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	u, err := url.Parse("http://" + h + "/")
	return err == nil && u.Host == h && u.User == nil && u.Path == "/"
}

func (s *Server) provider(ctx context.Context, id string) (*oidc.Provider, error) {
	p := s.deps.OIDC.Get(ctx, id)
	if p == nil {
		return nil, newErr(http.StatusNotFound, KeyNotFound, "identity provider "+id+" not found", "GET /auth/status lists the providers")
	}
	return p, nil
}

func (s *Server) oidcStart(ctx context.Context, in *oidcStartIn) (*redirectOut, error) {
	st := state(ctx)
	p, err := s.provider(ctx, in.IDP)
	if err != nil {
		return nil, err
	}
	ret := in.Redirect
	if ret == "" {
		ret = s.opts.PathPrefix + "/"
	} else if !safeReturn(ret) {
		return nil, errInvalid("redirect: want a path on this origin such as /zones")
	}
	if !validHost(in.host) {
		return nil, errInvalid("the request's Host header cannot name the callback")
	}
	scheme := "http"
	if st.secure {
		scheme = "https"
	}
	redirectURI := scheme + "://" + in.host + s.BasePath() + "/auth/oidc/" + url.PathEscape(p.ID()) + "/callback"
	ls, err := oidc.NewLoginState(p.ID(), redirectURI, ret, s.clock())
	if err != nil {
		return nil, fromError(err)
	}
	target, err := p.AuthCodeURL(ctx, ls)
	if err != nil {
		s.log.Warn("oidc login start", "provider", p.ID(), "request_id", st.id, "err", err)
		return nil, errProviderUnavailable(p.ID())
	}
	val, err := s.loginStates.Encode(ls)
	if err != nil {
		return nil, fromError(err)
	}
	secure := s.cookieSecure(st)
	return &redirectOut{Status: http.StatusFound, Location: target, SetCookie: []http.Cookie{{
		Name: loginCookieName(secure, s.cookiePath()), Value: val, Path: s.cookiePath(),
		MaxAge: int(oidc.LoginTTL / time.Second), HttpOnly: true, Secure: secure,
		// Lax: the cookie must come back on the provider's top-level
		// redirect to the callback.
		SameSite: http.SameSiteLaxMode,
	}}}, nil
}

func errProviderUnavailable(id string) *Error {
	return newErr(http.StatusServiceUnavailable, KeyUnavailable, "identity provider "+id+" cannot be reached",
		"try again later; the server log has details under the request id")
}

// clearLoginCookie is added to every callback answer: the browser keeps
// only the session cookie.
func (s *Server) clearLoginCookie(st *reqState) http.Cookie {
	secure := s.cookieSecure(st)
	return http.Cookie{Name: loginCookieName(secure, s.cookiePath()), Value: "", Path: s.cookiePath(), MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
}

func (s *Server) callbackErr(st *reqState, e *Error) *Error {
	if e.headers == nil {
		e.headers = http.Header{}
	}
	c := s.clearLoginCookie(st)
	e.headers.Add("Set-Cookie", c.String())
	return e
}

// providerErrorCode keeps the provider's error code if it looks like one
// (RFC 6749 codes are ASCII letters and underscores).
func providerErrorCode(v string) string {
	if len(v) > 64 {
		return "error"
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9') {
			return "error"
		}
	}
	return v
}

func (s *Server) oidcCallback(ctx context.Context, in *oidcCallbackIn) (*redirectOut, error) {
	st := state(ctx)
	p, err := s.provider(ctx, in.IDP)
	if err != nil {
		return nil, err
	}
	secure := s.cookieSecure(st)
	restart := "start the login again at " + s.startURL(p.ID())
	ls, err := s.loginStates.Decode(in.cookie(loginCookieName(secure, s.cookiePath())))
	if err != nil || ls.Provider != p.ID() {
		return nil, s.callbackErr(st, newErr(http.StatusBadRequest, KeyInvalid, "the login state is missing or expired", restart))
	}
	if in.State == "" || subtle.ConstantTimeCompare([]byte(in.State), []byte(ls.State)) != 1 {
		return nil, s.callbackErr(st, newErr(http.StatusBadRequest, KeyInvalid, "state does not match the login", restart))
	}
	if in.Error != "" {
		code := providerErrorCode(in.Error)
		s.log.Info("oidc login refused by the provider", "provider", p.ID(), "error", code, "request_id", st.id)
		return nil, s.callbackErr(st, newErr(http.StatusUnauthorized, KeyUnauthenticated, "the identity provider refused the login: "+code, restart))
	}
	if in.Code == "" {
		return nil, s.callbackErr(st, newErr(http.StatusBadRequest, KeyInvalid, "code is missing", restart))
	}
	id, err := p.Exchange(ctx, ls, in.Code)
	if err != nil {
		s.log.Warn("oidc login failed", "provider", p.ID(), "request_id", st.id, "err", err)
		if errors.Is(err, oidc.ErrRejected) {
			return nil, s.callbackErr(st, newErr(http.StatusUnauthorized, KeyUnauthenticated, "the identity provider's answer was not accepted", restart))
		}
		return nil, s.callbackErr(st, errProviderUnavailable(p.ID()))
	}
	grants, prints, err := s.authz.Freeze(ctx, id.Principal("session"))
	if err != nil {
		s.log.Error("oidc login: reading role bindings", "request_id", st.id, "err", err)
		return nil, s.callbackErr(st, errInternal())
	}
	sess, err := s.sessions.Issue(id.Username, p.ID(), time.Time{}, s.authLimits().SessionLifetime)
	if err != nil {
		return nil, s.callbackErr(st, fromError(err))
	}
	for _, g := range grants {
		sess.Grants = append(sess.Grants, g.String())
	}
	sess.Bindings, sess.Subject = prints, id.Subject
	s.log.Info("oidc login", "provider", p.ID(), "user", sanitize(id.Username), "grants", sess.Grants, "client", st.clientIP, "request_id", st.id)
	return &redirectOut{Status: http.StatusFound, Location: ls.Return, SetCookie: []http.Cookie{
		s.clearLoginCookie(st),
		{Name: auth.CookieName(secure, s.cookiePath()), Value: s.sessions.Encode(sess), Path: s.cookiePath(),
			Expires: time.Unix(sess.Expires, 0).UTC(), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode},
	}}, nil
}

// oidcSessionPrincipal is the principal of an OIDC-login session: no
// groups, grants frozen at login and honoured only while the bindings that
// gave them are unchanged. A session of a provider that is no longer
// configured is dropped (nil).
func (s *Server) oidcSessionPrincipal(ctx context.Context, sess auth.Session) *auth.Principal {
	if s.deps.OIDC.Get(ctx, sess.Provider) == nil {
		return nil
	}
	p := &auth.Principal{Kind: "User", ID: sess.Subject, Name: sess.User, Provider: sess.Provider,
		FrozenGrants: []auth.Grant{}, FrozenBindings: append([]string{}, sess.Bindings...)}
	for _, v := range sess.Grants {
		if g, err := auth.ParseGrant(v); err == nil {
			p.FrozenGrants = append(p.FrozenGrants, g)
		}
	}
	return p
}

// oidcSession reports whether a session came from an OIDC login.
func oidcSession(sess auth.Session) bool {
	return sess.Provider != "" && sess.Provider != "local"
}
