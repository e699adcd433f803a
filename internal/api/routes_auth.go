package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
)

// AuthProvider is one identity provider offered for login.
type AuthProvider struct {
	ID          string `json:"id"`
	DisplayName string `json:"displayName"`
	// StartURL begins a browser login: GET {base_url}/api/v1/auth/oidc/<id>/start.
	StartURL string `json:"startURL,omitempty"`
}

// AuthSessionLimits are the session lifetimes.
type AuthSessionLimits struct {
	IdleTimeout string `json:"idleTimeout"`
	Lifetime    string `json:"lifetime"`
}

// AuthStatus tells a login page what it may offer.
type AuthStatus struct {
	LocalLogin            bool               `json:"localLogin"`
	LocalLoginMode        string             `json:"localLoginMode" enum:"enabled,admins-only,disabled"`
	Providers             []AuthProvider     `json:"providers"`
	HasDefaultCredentials bool               `json:"hasDefaultCredentials"`
	Session               *AuthSessionLimits `json:"session,omitempty"`
}

// PrincipalInfo describes the caller.
type PrincipalInfo struct {
	Kind       string   `json:"kind"`
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Groups     []string `json:"groups"`
	Provider   string   `json:"provider"`
	AuthMethod string   `json:"authMethod"`
	TokenID    string   `json:"tokenID,omitempty"`
}

// MeBody is the answer of GET /auth/me, login and password change.
type MeBody struct {
	Principal          PrincipalInfo                  `json:"principal"`
	Roles              []string                       `json:"roles"`
	CSRF               string                         `json:"csrf,omitempty"`
	Permissions        map[string][]string            `json:"permissions"`
	ScopedPermissions  map[string]map[string][]string `json:"scopedPermissions"`
	MustChangePassword bool                           `json:"mustChangePassword"`
	ExpiresAt          *time.Time                     `json:"expiresAt,omitempty"`
	IdleExpiresAt      *time.Time                     `json:"idleExpiresAt,omitempty"`
}

type meOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
	Body      *MeBody
}

type loginIn struct {
	Body struct {
		Username string `json:"username" minLength:"1" maxLength:"253"`
		Password string `json:"password" minLength:"1" maxLength:"1024"`
	}
}

type passwordIn struct {
	Body struct {
		CurrentPassword string `json:"currentPassword" maxLength:"1024"`
		NewPassword     string `json:"newPassword" maxLength:"1024"`
		RevokeTokens    bool   `json:"revokeTokens,omitempty"`
	}
}

type statusOut struct{ Body *AuthStatus }

type emptyIn struct{}

type noContentOut struct {
	SetCookie http.Cookie `header:"Set-Cookie"`
}

// TokenInfo is a token record without its secret.
type TokenInfo struct {
	ID          string          `json:"id"`
	Description string          `json:"description,omitempty"`
	Owner       auth.TokenOwner `json:"owner"`
	CreatedAt   time.Time       `json:"createdAt"`
	ExpiresAt   *time.Time      `json:"expiresAt"`
	LastUsedAt  *time.Time      `json:"lastUsedAt,omitempty"`
	LastUsedIP  string          `json:"lastUsedIP,omitempty"`
	Scopes      []string        `json:"scopes,omitempty"`
	// FrozenGrants are the grants of an OIDC owner when the token was issued.
	FrozenGrants []string `json:"frozenGrants,omitempty" doc:"tokens of OIDC owners: the owner's grants when the token was issued, honoured while the bindings that gave them are unchanged"`
}

// CreatedToken is TokenInfo plus the secret, shown only once.
type CreatedToken struct {
	Token string `json:"token"`
	TokenInfo
	TookMS float64 `json:"took_ms"`
}

func (c *CreatedToken) setTook(ms float64) { c.TookMS = ms }

// CreateTokenRequest asks for a new token.
type CreateTokenRequest struct {
	Description string   `json:"description,omitempty" maxLength:"300"`
	ExpiresIn   string   `json:"expiresIn,omitempty" maxLength:"32" doc:"duration; empty means auth.tokens.maxLifetime, or never"`
	Scopes      []string `json:"scopes,omitempty" maxItems:"32" doc:"grants such as viewer or zone-admin@zone:<name>"`
}

func (s *Server) registerAuthRoutes() {
	register(s, huma.Operation{OperationID: "auth-status", Method: http.MethodGet, Path: "/auth/status", Summary: "Login options", Tags: []string{"auth"}},
		public(), s.authStatus)
	register(s, huma.Operation{OperationID: "auth-login", Method: http.MethodPost, Path: "/auth/login", Summary: "Log in with a local account", Tags: []string{"auth"},
		Errors: []int{http.StatusForbidden, http.StatusTooManyRequests, http.StatusUnauthorized}},
		public(), s.login)
	register(s, huma.Operation{OperationID: "auth-logout", Method: http.MethodPost, Path: "/auth/logout", Summary: "Log out", Tags: []string{"auth"}, DefaultStatus: http.StatusNoContent},
		public(), s.logout)
	register(s, huma.Operation{OperationID: "auth-me", Method: http.MethodGet, Path: "/auth/me", Summary: "Who am I", Tags: []string{"auth"}},
		clusterPerm("self.read").selfService(), s.me)
	register(s, huma.Operation{OperationID: "auth-password", Method: http.MethodPost, Path: "/auth/password", Summary: "Change my password", Tags: []string{"auth"}},
		clusterPerm("self.write").selfService(), s.changePassword)
	register(s, huma.Operation{OperationID: "auth-tokens-list", Method: http.MethodGet, Path: "/auth/tokens", Summary: "List my tokens (all=true: every token, needs tokens.read)", Tags: []string{"auth"}},
		clusterPerm("tokens.own"), s.listTokens)
	register(s, huma.Operation{OperationID: "auth-tokens-create", Method: http.MethodPost, Path: "/auth/tokens", Summary: "Create a token", Tags: []string{"auth"}, DefaultStatus: http.StatusCreated},
		clusterPerm("tokens.own"), s.createToken)
	register(s, huma.Operation{OperationID: "auth-tokens-get", Method: http.MethodGet, Path: "/auth/tokens/{id}", Summary: "One token", Tags: []string{"auth"}, Errors: []int{http.StatusNotFound}},
		clusterPerm("tokens.own"), s.getToken)
	register(s, huma.Operation{OperationID: "auth-tokens-delete", Method: http.MethodDelete, Path: "/auth/tokens/{id}", Summary: "Revoke a token", Tags: []string{"auth"}, DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound}},
		clusterPerm("tokens.own"), s.deleteToken)
	s.registerUserRoutes()
}

func (s *Server) authStatus(ctx context.Context, _ *emptyIn) (*statusOut, error) {
	st := &AuthStatus{LocalLogin: s.opts.LocalLogin != LocalLoginDisabled, LocalLoginMode: s.opts.LocalLogin, Providers: s.authProviders(ctx),
		Session: &AuthSessionLimits{IdleTimeout: s.authLimits().SessionIdleTimeout.String(), Lifetime: s.authLimits().SessionLifetime.String()}}
	if u, err := s.dir.GetUser(ctx, auth.AdminUsername); err == nil {
		// The generated password is the only one that sets mustChangePassword
		// at bootstrap; it stays "default" until changed.
		st.HasDefaultCredentials = u.MustChangePassword && u.BuiltinAdmin
	}
	return &statusOut{Body: st}, nil
}

// sanitize bounds a user-supplied name before it is logged.
func sanitize(v string) string {
	if len(v) > 64 {
		v = v[:64]
	}
	return strconv.QuoteToASCII(v)
}

// unknownLoginName stands for a login name that is no account: "unknown:"
// and 12 hex digits of an HMAC under the node's encryption key, so repeated
// attempts with one name can be correlated without the name (often a
// password typed in the wrong field) being readable in logs or audit.
func (s *Server) unknownLoginName(name string) string {
	m := hmac.New(sha256.New, append([]byte("login-name\x00"), s.keys.Current...))
	m.Write([]byte(name))
	return "unknown:" + hex.EncodeToString(m.Sum(nil)[:6])
}

func (s *Server) login(ctx context.Context, in *loginIn) (*meOut, error) {
	st := state(ctx)
	name := in.Body.Username
	u, err := s.dir.GetUser(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fromError(err)
	}
	// People type their password into the username field: a name that is
	// no account goes to the log and the audit trail only as a keyed hash.
	shown := name
	if u == nil {
		shown = s.unknownLoginName(name)
	}
	auditObject(ctx, "login", auth.KindLocalUser, "", shown, "")
	if st.crossOriginBad {
		return nil, newErr(http.StatusForbidden, KeyCSRF, "cross-origin login refused", "log in from the dashboard's own origin")
	}
	if s.opts.LocalLogin == LocalLoginDisabled {
		return nil, newErr(http.StatusForbidden, KeyLocalLoginDisabled, "local login is disabled", "log in through an identity provider")
	}
	if wait := s.lockout.Locked(st.clientIP, name); wait > 0 {
		return nil, errRateLimited(wait)
	}
	hash := ""
	if u != nil {
		hash = u.PasswordHash
	}
	ok, err := s.hasher.Verify(ctx, in.Body.Password, hash)
	if err != nil && !errors.Is(err, auth.ErrBadHash) {
		return nil, fromError(err)
	}
	if !ok {
		s.lockout.Fail(st.clientIP, name)
		s.log.Info("login failed", "user", sanitize(shown), "client", st.clientIP, "request_id", st.id)
		return nil, newErr(http.StatusUnauthorized, KeyUnauthenticated, "wrong username or password", "")
	}
	if u.Disabled {
		return nil, newErr(http.StatusForbidden, KeyAccountDisabled, "the account is disabled", "ask an administrator")
	}
	p := s.userPrincipal(u, "session")
	if s.opts.LocalLogin == LocalLoginAdminsOnly && !u.BuiltinAdmin {
		gs, _ := s.authz.Grants(ctx, p)
		if !slices.Contains(gs, auth.Grant{Role: auth.RoleAdmin, Scope: auth.ClusterScope}) {
			return nil, newErr(http.StatusForbidden, KeyLocalLoginAdminsOnly, "local login is open to administrators only", "log in through an identity provider")
		}
	}
	s.lockout.Succeed(name)
	sess, err := s.sessions.Issue(u.Username, "local", u.SessionsValidAfter, s.authLimits().SessionLifetime)
	if err != nil {
		return nil, fromError(err)
	}
	if err := s.dir.RecordLogin(ctx, u, s.clock()); err != nil {
		s.log.Warn("recording login", "error", err)
	}
	st.principal = p
	return s.meWithSession(ctx, st, p, sess)
}

func (s *Server) userPrincipal(u *auth.LocalUser, method string) *auth.Principal {
	return &auth.Principal{Kind: "User", ID: u.Username, Name: u.Username, Groups: u.Groups, Provider: "local",
		AuthMethod: method, BuiltinAdmin: u.BuiltinAdmin, MustChangePassword: u.MustChangePassword}
}

func (s *Server) meWithSession(ctx context.Context, st *reqState, p *auth.Principal, sess auth.Session) (*meOut, error) {
	p.SessionID = sess.ID
	p.SessionExpires = time.Unix(sess.Expires, 0).UTC()
	p.SessionIdle = time.Unix(sess.Seen, 0).Add(s.authLimits().SessionIdleTimeout).UTC()
	body := s.meBody(ctx, p)
	body.CSRF = s.sessions.CSRF(sess)
	secure := s.cookieSecure(st)
	return &meOut{Body: body, SetCookie: http.Cookie{
		Name: auth.CookieName(secure, s.cookiePath()), Value: s.sessions.Encode(sess),
		Path: s.cookiePath(), Expires: time.Unix(sess.Expires, 0).UTC(), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}}, nil
}

func (s *Server) logout(ctx context.Context, _ *emptyIn) (*noContentOut, error) {
	st := state(ctx)
	if st.csrfFailed {
		return nil, newErr(http.StatusForbidden, KeyCSRF, "missing or invalid CSRF token", "send the X-Service-CSRF header with the value from GET /auth/me")
	}
	if st.session != nil {
		// Revoked in memory at once; the write to <dataDir>/sessions.db keeps
		// it revoked across restarts. A failed write is logged, not answered:
		// the cookie is dead in this process either way.
		if err := s.sessions.Revoke(ctx, *st.session); err != nil {
			s.log.Error("persisting logout", "request_id", st.id, "error", err)
		}
	}
	secure := s.cookieSecure(st)
	auditObject(ctx, "logout", "", "", "", "")
	return &noContentOut{SetCookie: http.Cookie{Name: auth.CookieName(secure, s.cookiePath()), Value: "", Path: s.cookiePath(),
		MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}}, nil
}

func (s *Server) meBody(ctx context.Context, p *auth.Principal) *MeBody {
	groups := p.Groups
	if groups == nil {
		groups = []string{}
	}
	b := &MeBody{
		Principal: PrincipalInfo{Kind: p.Kind, ID: p.ID, Name: p.Name, Groups: groups, Provider: p.Provider, AuthMethod: p.AuthMethod, TokenID: p.TokenID},
		Roles:     []string{}, MustChangePassword: p.MustChangePassword,
	}
	gs, _ := s.authz.EffectiveGrants(ctx, p)
	for _, g := range gs {
		b.Roles = append(b.Roles, g.String())
	}
	b.Permissions, b.ScopedPermissions = s.authz.Permissions(ctx, p)
	if !p.SessionExpires.IsZero() {
		e, i := p.SessionExpires, p.SessionIdle
		b.ExpiresAt, b.IdleExpiresAt = &e, &i
	} else if p.TokenExpiresAt != nil {
		b.ExpiresAt = p.TokenExpiresAt
	}
	return b
}

type meOnlyOut struct{ Body *MeBody }

func (s *Server) me(ctx context.Context, _ *emptyIn) (*meOnlyOut, error) {
	st := state(ctx)
	b := s.meBody(ctx, st.principal)
	if st.session != nil {
		b.CSRF = s.sessions.CSRF(*st.session)
	}
	return &meOnlyOut{Body: b}, nil
}

func (s *Server) changePassword(ctx context.Context, in *passwordIn) (*meOut, error) {
	st := state(ctx)
	p := st.principal
	if p.Kind != "User" || p.Provider != "local" || p.AuthMethod == "socket" {
		return nil, newErr(http.StatusBadRequest, KeyInvalid, "only local users have a password", "")
	}
	auditObject(ctx, "change-password", auth.KindLocalUser, "", p.Name, "")
	u, err := s.dir.GetUser(ctx, p.Name)
	if err != nil {
		return nil, fromError(err)
	}
	if wait := s.lockout.Locked(st.clientIP, u.Username); wait > 0 {
		return nil, errRateLimited(wait)
	}
	ok, err := s.hasher.Verify(ctx, in.Body.CurrentPassword, u.PasswordHash)
	if err != nil || !ok {
		s.lockout.Fail(st.clientIP, u.Username)
		return nil, newErr(http.StatusBadRequest, KeyInvalid, "currentPassword is wrong", "")
	}
	if err := auth.CheckPasswordPolicy(in.Body.NewPassword); err != nil {
		return nil, newErr(http.StatusBadRequest, KeyInvalid, "newPassword: "+err.Error(), "")
	}
	hash, err := s.hasher.Hash(ctx, in.Body.NewPassword)
	if err != nil {
		return nil, fromError(err)
	}
	now := s.clock().UTC().Truncate(time.Second)
	u.PasswordHash, u.MustChangePassword, u.PasswordChangedAt = hash, false, now
	// Every earlier session is revoked; the caller gets a fresh one.
	u.SessionsValidAfter = now
	saved, err := s.dir.SaveUser(ctx, u, store.ManagerAPI)
	if err != nil {
		return nil, fromError(err)
	}
	if in.Body.RevokeTokens {
		if err := s.revokeUserTokens(ctx, u.Username); err != nil {
			return nil, fromError(err)
		}
	}
	np := s.userPrincipal(saved, p.AuthMethod)
	np.TokenID, np.Scopes, np.TokenExpiresAt = p.TokenID, p.Scopes, p.TokenExpiresAt
	if p.AuthMethod != "session" {
		return &meOut{Body: s.meBody(ctx, np)}, nil
	}
	sess, err := s.sessions.Issue(saved.Username, "local", saved.SessionsValidAfter, s.authLimits().SessionLifetime)
	if err != nil {
		return nil, fromError(err)
	}
	return s.meWithSession(ctx, st, np, sess)
}

// revokeUserTokens deletes every API token of local user user.
func (s *Server) revokeUserTokens(ctx context.Context, user string) error {
	_, err := s.deleteUserTokens(ctx, user)
	return err
}

func tokenInfo(t *auth.Token) TokenInfo {
	return TokenInfo{ID: t.ID, Description: t.Description, Owner: t.Owner, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
		LastUsedAt: t.LastUsedAt, LastUsedIP: t.LastUsedIP, Scopes: t.Scopes, FrozenGrants: t.FrozenGrants}
}

func ownedBy(t *auth.Token, p *auth.Principal) bool {
	switch p.Kind {
	case "User":
		// A local user and an OIDC user may share a name; the provider
		// tells them apart (tokens of local users say local or nothing).
		prov := t.Owner.Provider
		if prov == "" {
			prov = "local"
		}
		return t.Owner.Kind == "User" && t.Owner.Name == p.Name && prov == p.Provider
	case "ServiceAccount":
		return t.Owner.Kind == "ServiceAccount" && t.Owner.Name == p.Name && t.Owner.Namespace == p.Namespace
	}
	return false
}

type listTokensIn struct {
	All bool `query:"all" doc:"every token; needs tokens.read"`
}

type tokenListOut struct {
	Body *AuthListBody[TokenInfo]
}

func (s *Server) listTokens(ctx context.Context, in *listTokensIn) (*tokenListOut, error) {
	p := state(ctx).principal
	if in.All && !s.authz.Authorize(ctx, p, "tokens.read", auth.ClusterScope).Allowed {
		return nil, errForbidden("tokens.read")
	}
	ts, err := s.dir.ListTokens(ctx)
	if err != nil {
		return nil, fromError(err)
	}
	out := &AuthListBody[TokenInfo]{Items: []TokenInfo{}}
	for _, t := range ts {
		if in.All || s.ownVisible(t, p) {
			out.Items = append(out.Items, tokenInfo(t))
		}
	}
	return &tokenListOut{Body: out}, nil
}

// ownVisible reports whether tokens.own lets p see and revoke t: p owns it
// and, when p is a token with scopes, t is that token or no wider than it
// (token scopes narrow the implicit tokens.own too).
func (s *Server) ownVisible(t *auth.Token, p *auth.Principal) bool {
	if !ownedBy(t, p) {
		return false
	}
	return p.Scopes == nil || t.ID == p.TokenID || auth.CoversScopes(p.Scopes, t.Scopes)
}

type createTokenIn struct{ Body CreateTokenRequest }

type createdTokenOut struct{ Body *CreatedToken }

func (s *Server) createToken(ctx context.Context, in *createTokenIn) (*createdTokenOut, error) {
	p := state(ctx).principal
	var owner auth.TokenOwner
	var frozen, prints []string
	switch {
	case p.AuthMethod == "socket":
		return nil, errInvalid("the local administrator cannot own tokens; use the admin socket's create-token")
	case p.Provider == "kubernetes":
		// Their grants come from SubjectAccessReview, which a token of
		// ours could not carry.
		return nil, errInvalid("Kubernetes identities cannot own API tokens; send the ServiceAccount token itself as the bearer credential")
	case p.Kind == "User" && p.Provider != "local":
		// An OIDC owner: the token carries the grants the owner holds now
		// (frozen), honoured while the bindings that give them are unchanged.
		if s.deps.OIDC.Get(ctx, p.Provider) == nil {
			return nil, errInvalid("identity provider %q is not configured any more", p.Provider)
		}
		grants, fps, err := s.authz.Freeze(ctx, p)
		if err != nil {
			return nil, fromError(err)
		}
		frozen, prints = []string{}, fps
		for _, g := range grants {
			frozen = append(frozen, g.String())
		}
		owner = auth.TokenOwner{Kind: "User", Name: p.Name, Provider: p.Provider, ID: p.ID}
	case p.Kind == "User":
		owner = auth.TokenOwner{Kind: "User", Name: p.Name, Provider: p.Provider}
	case p.Kind == "ServiceAccount":
		owner = auth.TokenOwner{Kind: "ServiceAccount", Name: p.Name, Namespace: p.Namespace}
	default:
		return nil, errInvalid("this principal cannot own tokens")
	}
	now := s.clock().UTC().Truncate(time.Second)
	exp, err := s.tokenExpiry(now, in.Body.ExpiresIn)
	if err != nil {
		return nil, err
	}
	scopes := in.Body.Scopes
	for _, sc := range scopes {
		g, err := auth.ParseGrant(sc)
		if err != nil {
			return nil, errInvalid("scopes: %v", err)
		}
		if !s.authz.CanGrant(ctx, p, g) {
			e := errForbidden(g.Role)
			e.Detail.Message = "scope " + sc + " is wider than the caller's grants"
			return nil, e
		}
	}
	if len(scopes) == 0 && p.Scopes != nil {
		// A narrowed token hands on its narrowing, never the owner's full grants.
		for _, g := range p.Scopes {
			scopes = append(scopes, g.String())
		}
	}
	if p.TokenExpiresAt != nil && (exp == nil || exp.After(*p.TokenExpiresAt)) {
		if in.Body.ExpiresIn != "" {
			return nil, errInvalid("expiresIn: a token cannot outlive the token that creates it (expires %s)", p.TokenExpiresAt.Format(time.RFC3339))
		}
		// The default lifetime is cut to the creating token's.
		e := *p.TokenExpiresAt
		exp = &e
	}
	tok, id, err := auth.NewToken()
	if err != nil {
		return nil, fromError(err)
	}
	t, err := s.dir.CreateToken(ctx, &auth.Token{ID: id, Hash: auth.HashToken(tok), Owner: owner, Description: in.Body.Description,
		Scopes: scopes, CreatedAt: now, ExpiresAt: exp, FrozenGrants: frozen, FrozenBindings: prints}, store.ManagerAPI)
	if err != nil {
		return nil, fromError(err)
	}
	auditObject(ctx, "create-token", auth.KindAPIToken, "", id, "created")
	return &createdTokenOut{Body: &CreatedToken{Token: tok, TokenInfo: tokenInfo(t)}}, nil
}

// tokenExpiry applies auth.tokens.maxLifetime as default and cap.
func (s *Server) tokenExpiry(now time.Time, expiresIn string) (*time.Time, error) {
	max := s.authLimits().TokenMaxLifetime
	if expiresIn == "" {
		if max <= 0 {
			return nil, nil
		}
		e := now.Add(max)
		return &e, nil
	}
	d, err := time.ParseDuration(expiresIn)
	if err != nil || d <= 0 {
		return nil, errInvalid("expiresIn: %q is not a positive duration such as 720h", expiresIn)
	}
	if max > 0 && d > max {
		return nil, errInvalid("expiresIn: %s is longer than auth.tokens.maxLifetime %s", d, max)
	}
	e := now.Add(d)
	return &e, nil
}

type tokenIDIn struct {
	ID string `path:"id" maxLength:"64"`
}

type tokenOut struct{ Body *TokenInfo }

// visibleToken returns the token when the caller owns it or holds perm;
// otherwise not found, so that other people's token ids are not confirmed.
func (s *Server) visibleToken(ctx context.Context, id, perm string) (*auth.Token, error) {
	p := state(ctx).principal
	t, err := s.dir.GetToken(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errNotFound("token " + id)
		}
		return nil, fromError(err)
	}
	if !s.ownVisible(t, p) && !s.authz.Authorize(ctx, p, perm, auth.ClusterScope).Allowed {
		return nil, errNotFound("token " + id)
	}
	return t, nil
}

func (s *Server) getToken(ctx context.Context, in *tokenIDIn) (*tokenOut, error) {
	t, err := s.visibleToken(ctx, in.ID, "tokens.read")
	if err != nil {
		return nil, err
	}
	ti := tokenInfo(t)
	return &tokenOut{Body: &ti}, nil
}

type emptyOut struct{}

func (s *Server) deleteToken(ctx context.Context, in *tokenIDIn) (*emptyOut, error) {
	t, err := s.visibleToken(ctx, in.ID, "tokens.delete")
	if err != nil {
		return nil, err
	}
	auditObject(ctx, "delete-token", auth.KindAPIToken, "", t.ID, "deleted")
	if err := s.dir.DeleteToken(ctx, t); err != nil {
		return nil, fromError(err)
	}
	return &emptyOut{}, nil
}
