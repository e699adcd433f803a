package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
)

// AdminResetPasswordRequest is the body of POST /admin/v1/reset-password.
type AdminResetPasswordRequest struct {
	Username     string `json:"username"`
	Password     string `json:"password"`
	Create       bool   `json:"create"`
	RevokeTokens bool   `json:"revokeTokens"`
}

// AdminResetPasswordAnswer answers reset-password; Password is present only
// when it was generated.
type AdminResetPasswordAnswer struct {
	Username           string `json:"username"`
	Password           string `json:"password,omitempty"`
	MustChangePassword bool   `json:"mustChangePassword"`
	Created            bool   `json:"created"`
}

// AdminCreateTokenRequest is the body of POST /admin/v1/create-token.
type AdminCreateTokenRequest struct {
	User        string `json:"user"`
	Description string `json:"description"`
	ExpiresIn   string `json:"expiresIn"`
}

// AdminTokenOwner names the owner of a token minted on the socket.
type AdminTokenOwner struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	ID        string `json:"id"`
	Provider  string `json:"provider"`
}

// AdminCreatedToken answers create-token; the secret is shown only here.
type AdminCreatedToken struct {
	ID        string          `json:"id"`
	Token     string          `json:"token"`
	Owner     AdminTokenOwner `json:"owner"`
	ExpiresAt *time.Time      `json:"expiresAt"`
}

// AdminUser is one row of list-users (no password hash).
type AdminUser struct {
	Name               string     `json:"name"`
	DisplayName        string     `json:"displayName"`
	BuiltinAdmin       bool       `json:"builtinAdmin"`
	Disabled           bool       `json:"disabled"`
	MustChangePassword bool       `json:"mustChangePassword"`
	Groups             []string   `json:"groups"`
	LastLoginAt        *time.Time `json:"lastLoginAt"`
	PasswordChangedAt  *time.Time `json:"passwordChangedAt"`
}

// AdminUserList answers list-users.
type AdminUserList struct {
	Users []AdminUser `json:"users"`
}

// decodeAdminBody reads one JSON object strictly: unknown fields, trailing
// data and wrong types are 400 invalid; an empty body is the zero value.
func decodeAdminBody(r *http.Request, v any) *Error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return newErr(http.StatusRequestEntityTooLarge, KeyTooLarge, "request body too large", "at most 64 KiB")
		}
		return errInvalid("reading body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errInvalid("body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errInvalid("body: one JSON object expected")
	}
	return nil
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// validUsername follows LocalUser spec.username: 1 to 253 characters
// without whitespace, ':' or '/'.
func validUsername(u string) bool {
	if u == "" || len(u) > 253 {
		return false
	}
	for _, c := range u {
		if unicode.IsSpace(c) || c == ':' || c == '/' || c == 0 {
			return false
		}
	}
	return true
}

func (s *Server) adminResetPassword(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var in AdminResetPasswordRequest
	if e := decodeAdminBody(r, &in); e != nil {
		writeError(w, r, e)
		return
	}
	if in.Username == "" {
		in.Username = auth.AdminUsername
	}
	if !validUsername(in.Username) {
		writeError(w, r, errInvalid("username: 1 to 253 characters without whitespace, ':' or '/'"))
		return
	}
	auditObject(ctx, "reset-password", auth.KindLocalUser, "", in.Username, "")
	st := state(ctx)
	target := &st.targets[len(st.targets)-1]
	pw, generated := in.Password, false
	if pw == "" {
		var err error
		if pw, err = auth.GeneratePassword(); err != nil {
			writeError(w, r, fromError(err))
			return
		}
		generated = true
	} else if err := auth.CheckPasswordPolicy(pw); err != nil {
		writeError(w, r, errInvalid("password: %v", err))
		return
	}
	u, err := s.dir.GetUser(ctx, in.Username)
	created := false
	switch {
	case errors.Is(err, store.ErrNotFound):
		if !in.Create {
			writeError(w, r, newErr(http.StatusNotFound, KeyNotFound, "user "+in.Username+" not found", "pass create: true (--create) to create it"))
			return
		}
		// Recreating the first-boot administrator restores its built-in
		// administrator flag; other users start without grants.
		u, created = &auth.LocalUser{Username: in.Username, BuiltinAdmin: in.Username == auth.AdminUsername}, true
	case err != nil:
		writeError(w, r, fromError(err))
		return
	}
	hash, err := s.hasher.Hash(ctx, pw)
	if err != nil {
		writeError(w, r, fromError(err))
		return
	}
	now := s.clock().UTC().Truncate(time.Second)
	u.PasswordHash, u.MustChangePassword, u.PasswordChangedAt = hash, true, now
	// Every session of the user is revoked.
	u.SessionsValidAfter = now
	if _, err := s.dir.SaveUser(ctx, u, store.ManagerAPI); err != nil {
		writeError(w, r, fromError(err))
		return
	}
	s.lockout.Succeed(u.Username)
	if in.RevokeTokens {
		if err := s.revokeUserTokens(ctx, u.Username); err != nil {
			writeError(w, r, fromError(err))
			return
		}
	}
	target.result = "reset"
	if created {
		target.result = "created"
	}
	if in.RevokeTokens {
		target.result += ", tokens revoked"
	}
	ans := AdminResetPasswordAnswer{Username: u.Username, MustChangePassword: true, Created: created}
	if generated {
		ans.Password = pw
	}
	writeAdminJSON(w, http.StatusOK, ans)
}

func (s *Server) adminCreateToken(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var in AdminCreateTokenRequest
	if e := decodeAdminBody(r, &in); e != nil {
		writeError(w, r, e)
		return
	}
	if len(in.Description) > 300 {
		writeError(w, r, errInvalid("description: at most 300 bytes"))
		return
	}
	if len(in.ExpiresIn) > maxExpiresInLen {
		writeError(w, r, errInvalid("expiresIn: at most %d characters", maxExpiresInLen))
		return
	}
	now := s.clock().UTC().Truncate(time.Second)
	var owner auth.TokenOwner
	var ans AdminTokenOwner
	var exp *time.Time
	if in.User == "" {
		ns := s.dir.Namespace()
		if err := s.dir.EnsureBuiltinServiceAccount(ctx, auth.BreakGlassServiceAccount, store.Manager("bootstrap")); err != nil {
			writeError(w, r, fromError(err))
			return
		}
		sa, err := s.dir.GetServiceAccount(ctx, ns, auth.BreakGlassServiceAccount)
		if err != nil {
			writeError(w, r, fromError(err))
			return
		}
		if sa.Disabled {
			writeError(w, r, newErr(http.StatusConflict, KeyConflict, "service account "+ns+"/"+auth.BreakGlassServiceAccount+" is disabled", "enable it, or mint a user's token with user"))
			return
		}
		owner = auth.TokenOwner{Kind: "ServiceAccount", Name: auth.BreakGlassServiceAccount, Namespace: ns}
		ans = AdminTokenOwner{Kind: "ServiceAccount", Name: owner.Name, Namespace: ns, ID: "serviceaccount:" + ns + ":" + owner.Name, Provider: "local"}
		e, bad := s.breakGlassExpiry(now, in.ExpiresIn)
		if bad != nil {
			writeError(w, r, bad)
			return
		}
		exp = e
	} else {
		if !validUsername(in.User) {
			writeError(w, r, errInvalid("user: 1 to 253 characters without whitespace, ':' or '/'"))
			return
		}
		u, err := s.dir.GetUser(ctx, in.User)
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, r, newErr(http.StatusNotFound, KeyNotFound, "user "+in.User+" not found", "list-users shows the local users"))
			return
		} else if err != nil {
			writeError(w, r, fromError(err))
			return
		}
		if u.Disabled {
			writeError(w, r, newErr(http.StatusConflict, KeyConflict, "user "+u.Username+" is disabled", "a disabled user's tokens do not authenticate"))
			return
		}
		owner = auth.TokenOwner{Kind: "User", Name: u.Username, Provider: "local"}
		ans = AdminTokenOwner{Kind: "User", Name: u.Username, ID: u.Username, Provider: "local"}
		e, err := s.tokenExpiry(now, in.ExpiresIn)
		if err != nil {
			writeError(w, r, fromError(err))
			return
		}
		exp = e
	}
	tok, id, err := auth.NewToken()
	if err != nil {
		writeError(w, r, fromError(err))
		return
	}
	desc := in.Description
	if desc == "" {
		desc = "admin socket"
	}
	t, err := s.dir.CreateToken(ctx, &auth.Token{ID: id, Hash: auth.HashToken(tok), Owner: owner, Description: desc,
		CreatedAt: now, ExpiresAt: exp}, store.ManagerAPI)
	if err != nil {
		writeError(w, r, fromError(err))
		return
	}
	auditObject(ctx, "create-token", auth.KindAPIToken, "", id, "created for "+owner.Kind+" "+owner.Name)
	writeAdminJSON(w, http.StatusCreated, AdminCreatedToken{ID: t.ID, Token: tok, Owner: ans, ExpiresAt: t.ExpiresAt})
}

// breakGlassExpiry: default 24h, capped by auth.tokens.maxLifetime.
func (s *Server) breakGlassExpiry(now time.Time, expiresIn string) (*time.Time, *Error) {
	max := s.authLimits().TokenMaxLifetime
	d := breakGlassLifetime
	if max > 0 && max < d {
		d = max
	}
	if expiresIn != "" {
		v, err := time.ParseDuration(expiresIn)
		if err != nil || v <= 0 {
			return nil, errInvalid("expiresIn: %q is not a positive duration such as 24h", expiresIn)
		}
		if max > 0 && v > max {
			return nil, errInvalid("expiresIn: %s is longer than auth.tokens.maxLifetime %s", v, max)
		}
		d = v
	}
	e := now.Add(d)
	return &e, nil
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func (s *Server) adminListUsers(w http.ResponseWriter, r *http.Request) {
	us, err := s.dir.ListUsers(r.Context())
	if err != nil {
		writeError(w, r, fromError(err))
		return
	}
	out := AdminUserList{Users: make([]AdminUser, 0, len(us))}
	for _, u := range us {
		groups := u.Groups
		if groups == nil {
			groups = []string{}
		}
		out.Users = append(out.Users, AdminUser{Name: u.Username, DisplayName: u.DisplayName, BuiltinAdmin: u.BuiltinAdmin,
			Disabled: u.Disabled, MustChangePassword: u.MustChangePassword, Groups: groups,
			LastLoginAt: optTime(u.LastLoginAt), PasswordChangedAt: optTime(u.PasswordChangedAt)})
	}
	writeAdminJSON(w, http.StatusOK, out)
}
