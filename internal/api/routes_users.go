package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
)

// Local user management (users.read, users.write, users.delete). GET
// /iam/users (the list) is in routes_misc.go.

// maxUserGroups bounds LocalUser spec.groups.
const maxUserGroups = 64

// UserBody is one local user.
type UserBody struct {
	IAMUser
	TookMS float64 `json:"took_ms"`
}

func (b *UserBody) setTook(ms float64) { b.TookMS = ms }

// CreateUserRequest creates a local user.
type CreateUserRequest struct {
	Name        string   `json:"name" minLength:"1" maxLength:"253" doc:"login name: no whitespace, ':' or '/'"`
	DisplayName string   `json:"displayName,omitempty" maxLength:"253"`
	Groups      []string `json:"groups,omitempty" maxItems:"64" doc:"groups role bindings can name (at most 64, each 1 to 253 characters)"`
	Password    string   `json:"password,omitempty" maxLength:"1024" doc:"initial password (8 characters to 1024 bytes); empty: one is generated and answered once"`
	// MustChangePassword defaults to true: the person changes the password
	// the administrator knows at first login.
	MustChangePassword *bool `json:"mustChangePassword,omitempty" doc:"default true; false needs a password (a generated one must be changed)"`
}

// CreatedUser answers a creation; Password only when it was generated.
type CreatedUser struct {
	User     IAMUser `json:"user"`
	Password string  `json:"password,omitempty" doc:"the generated password, shown only in this answer"`
	TookMS   float64 `json:"took_ms"`
}

func (c *CreatedUser) setTook(ms float64) { c.TookMS = ms }

// UpdateUserRequest changes a user's display name or groups; an absent
// member is left as it is, groups [] removes every group.
type UpdateUserRequest struct {
	DisplayName *string   `json:"displayName,omitempty" maxLength:"253"`
	Groups      *[]string `json:"groups,omitempty" maxItems:"64"`
}

// ResetPasswordRequest sets a user's password as an administrator.
type ResetPasswordRequest struct {
	Password     string `json:"password,omitempty" maxLength:"1024" doc:"new password; empty: one is generated and answered once"`
	RevokeTokens bool   `json:"revokeTokens,omitempty" doc:"also delete every API token of the user"`
}

// ResetPasswordAnswer says what a reset did.
type ResetPasswordAnswer struct {
	User          IAMUser `json:"user"`
	Password      string  `json:"password,omitempty" doc:"the generated password, shown only in this answer"`
	TokensRevoked int     `json:"tokensRevoked"`
	TookMS        float64 `json:"took_ms"`
}

func (a *ResetPasswordAnswer) setTook(ms float64) { a.TookMS = ms }

type userNameIn struct {
	Name string `path:"name" maxLength:"253"`
}

type userOut struct{ Body *UserBody }

type createUserIn struct{ Body CreateUserRequest }

type createdUserOut struct{ Body *CreatedUser }

type updateUserIn struct {
	Name string `path:"name" maxLength:"253"`
	Body UpdateUserRequest
}

type resetPasswordIn struct {
	Name string `path:"name" maxLength:"253"`
	Body ResetPasswordRequest
}

type resetPasswordOut struct{ Body *ResetPasswordAnswer }

func (s *Server) registerUserRoutes() {
	tags := []string{"iam"}
	register(s, huma.Operation{OperationID: "iam-users-get", Method: http.MethodGet, Path: "/iam/users/{name}", Summary: "One local user", Tags: tags,
		Errors: []int{http.StatusNotFound}},
		clusterPerm("users.read"), s.getUser)
	register(s, huma.Operation{OperationID: "iam-users-create", Method: http.MethodPost, Path: "/iam/users", Summary: "Create a local user",
		Description: "With no password one is generated and answered once; mustChangePassword defaults to true.",
		Tags:        tags, DefaultStatus: http.StatusCreated, Errors: []int{http.StatusConflict}},
		clusterPerm("users.write"), s.createUser)
	register(s, huma.Operation{OperationID: "iam-users-update", Method: http.MethodPatch, Path: "/iam/users/{name}", Summary: "Change a local user's display name or groups",
		Tags: tags, Errors: []int{http.StatusNotFound, http.StatusConflict}},
		clusterPerm("users.write"), s.updateUser)
	register(s, huma.Operation{OperationID: "iam-users-disable", Method: http.MethodPost, Path: "/iam/users/{name}/disable", Summary: "Disable a local user",
		Description: "Its sessions and tokens stop working at once (401) and login answers 403 account_disabled. " +
			"The last enabled administrator cannot be disabled (409).",
		Tags: tags, Errors: []int{http.StatusNotFound, http.StatusConflict}},
		clusterPerm("users.write"), s.disableUser)
	register(s, huma.Operation{OperationID: "iam-users-enable", Method: http.MethodPost, Path: "/iam/users/{name}/enable", Summary: "Enable a disabled local user",
		Description: "Its tokens work again; sessions from before the disable stay revoked.",
		Tags:        tags, Errors: []int{http.StatusNotFound}},
		clusterPerm("users.write"), s.enableUser)
	register(s, huma.Operation{OperationID: "iam-users-reset-password", Method: http.MethodPost, Path: "/iam/users/{name}/reset-password", Summary: "Set a local user's password",
		Description: "Sets mustChangePassword and revokes every session of the user; revokeTokens deletes its API tokens too.",
		Tags:        tags, Errors: []int{http.StatusNotFound}},
		clusterPerm("users.write"), s.resetUserPassword)
	register(s, huma.Operation{OperationID: "iam-users-delete", Method: http.MethodDelete, Path: "/iam/users/{name}", Summary: "Delete a local user and its API tokens",
		Description: "The last enabled administrator cannot be deleted (409).",
		Tags:        tags, DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound, http.StatusConflict}},
		clusterPerm("users.delete"), s.deleteUser)
}

func iamUser(u *auth.LocalUser) IAMUser {
	g := u.Groups
	if g == nil {
		g = []string{}
	}
	return IAMUser{Name: u.Username, DisplayName: u.DisplayName, BuiltinAdmin: u.BuiltinAdmin, Disabled: u.Disabled,
		MustChangePassword: u.MustChangePassword, Groups: g, LastLoginAt: timePtr(u.LastLoginAt), PasswordChangedAt: timePtr(u.PasswordChangedAt)}
}

func (s *Server) lookupUser(ctx context.Context, name string) (*auth.LocalUser, error) {
	u, err := s.dir.GetUser(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, newErr(http.StatusNotFound, KeyNotFound, "user "+name+" not found", "svc users list shows the local users")
	}
	if err != nil {
		return nil, fromError(err)
	}
	return u, nil
}

// checkGroups validates group names: 1 to 253 printable characters each,
// at most maxUserGroups, no duplicates.
func checkGroups(groups []string) error {
	if len(groups) > maxUserGroups {
		return fmt.Errorf("groups: %d given, at most %d", len(groups), maxUserGroups)
	}
	for i, g := range groups {
		if g == "" || len(g) > 253 || strings.IndexFunc(g, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
			return fmt.Errorf("groups[%d]: %q must be 1 to 253 characters without whitespace or control characters", i, g)
		}
		if slices.Contains(groups[:i], g) {
			return fmt.Errorf("groups[%d]: %q is listed twice", i, g)
		}
	}
	return nil
}

// isAdmin reports whether u administers the service: the built-in flag or a
// binding of the admin role at cluster scope (to the user or a group).
func (s *Server) isAdmin(ctx context.Context, u *auth.LocalUser) (bool, error) {
	if u.BuiltinAdmin {
		return true, nil
	}
	gs, err := s.authz.Grants(ctx, s.userPrincipal(u, ""))
	if err != nil {
		return false, err
	}
	return slices.Contains(gs, auth.Grant{Role: auth.RoleAdmin, Scope: auth.ClusterScope}), nil
}

// keepsAnAdmin refuses a change that would leave no enabled local
// administrator: after is the user as the change leaves it (nil: deleted).
// Only local accounts count: they are the way in when an identity provider
// is down.
func (s *Server) keepsAnAdmin(ctx context.Context, before, after *auth.LocalUser, what string) error {
	if before.Disabled {
		return nil // it was no enabled administrator before either
	}
	wasAdmin, err := s.isAdmin(ctx, before)
	if err != nil || !wasAdmin {
		return err
	}
	if after != nil && !after.Disabled {
		if still, err := s.isAdmin(ctx, after); err != nil || still {
			return err
		}
	}
	users, err := s.dir.ListUsers(ctx)
	if err != nil {
		return err
	}
	for _, o := range users {
		if o.Username == before.Username || o.Disabled {
			continue
		}
		if ok, err := s.isAdmin(ctx, o); err != nil || ok {
			return err
		}
	}
	return newErr(http.StatusConflict, KeyConflict,
		fmt.Sprintf("cannot %s %s: it is the last enabled administrator", what, before.Username),
		"make another local user an administrator first (a RoleBinding of role admin to the user or one of its groups); "+
			"to stop local logins altogether set auth.localLogin to disabled")
}

func (s *Server) getUser(ctx context.Context, in *userNameIn) (*userOut, error) {
	u, err := s.lookupUser(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	return &userOut{Body: &UserBody{IAMUser: iamUser(u)}}, nil
}

func (s *Server) createUser(ctx context.Context, in *createUserIn) (*createdUserOut, error) {
	b := in.Body
	auditObject(ctx, "create-user", auth.KindLocalUser, "", b.Name, "")
	if !validUsername(b.Name) {
		return nil, errInvalid("name: %q must be 1 to 253 characters without whitespace, ':' or '/'", b.Name)
	}
	if err := checkGroups(b.Groups); err != nil {
		return nil, errInvalid("%v", err)
	}
	must := b.MustChangePassword == nil || *b.MustChangePassword
	pw, generated := b.Password, false
	if pw == "" {
		if !must {
			return nil, errInvalid("mustChangePassword: false needs a password; a generated password must be changed at first login")
		}
		var err error
		if pw, err = auth.GeneratePassword(); err != nil {
			return nil, fromError(err)
		}
		generated = true
	} else if err := auth.CheckPasswordPolicy(pw); err != nil {
		return nil, errInvalid("password: %v", err)
	}
	if _, err := s.dir.GetUser(ctx, b.Name); err == nil {
		return nil, newErr(http.StatusConflict, KeyConflict, "user "+b.Name+" exists", "change it with PATCH /iam/users/"+b.Name+" (svc users set)")
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fromError(err)
	}
	hash, err := s.hasher.Hash(ctx, pw)
	if err != nil {
		return nil, fromError(err)
	}
	now := s.clock().UTC().Truncate(time.Second)
	// A cookie of an earlier user of this name (deleted, then created
	// again) is not valid for the new one; such a cookie may carry an iat
	// up to a second ahead (sessions.Issue), hence the second.
	u, err := s.dir.SaveUser(ctx, &auth.LocalUser{Username: b.Name, DisplayName: b.DisplayName, Groups: b.Groups, PasswordHash: hash,
		MustChangePassword: must, PasswordChangedAt: now, SessionsValidAfter: now.Add(time.Second)}, store.ManagerAPI)
	if err != nil {
		return nil, fromError(err)
	}
	st := state(ctx)
	st.targets[len(st.targets)-1].result = "created"
	out := &CreatedUser{User: iamUser(u)}
	if generated {
		out.Password = pw
	}
	return &createdUserOut{Body: out}, nil
}

func (s *Server) updateUser(ctx context.Context, in *updateUserIn) (*userOut, error) {
	auditObject(ctx, "update-user", auth.KindLocalUser, "", in.Name, "")
	u, err := s.lookupUser(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	before := *u
	if in.Body.DisplayName != nil {
		u.DisplayName = *in.Body.DisplayName
	}
	if in.Body.Groups != nil {
		if err := checkGroups(*in.Body.Groups); err != nil {
			return nil, errInvalid("%v", err)
		}
		u.Groups = *in.Body.Groups
		if err := s.keepsAnAdmin(ctx, &before, u, "change the groups of"); err != nil {
			return nil, asError(err)
		}
	}
	return s.saveUser(ctx, u, "updated")
}

func (s *Server) saveUser(ctx context.Context, u *auth.LocalUser, result string) (*userOut, error) {
	saved, err := s.dir.SaveUser(ctx, u, store.ManagerAPI)
	if err != nil {
		return nil, fromError(err)
	}
	st := state(ctx)
	st.targets[len(st.targets)-1].result = result
	return &userOut{Body: &UserBody{IAMUser: iamUser(saved)}}, nil
}

// asError keeps an *Error as it is and wraps anything else.
func asError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return fromError(err)
}

func (s *Server) disableUser(ctx context.Context, in *userNameIn) (*userOut, error) {
	auditObject(ctx, "disable-user", auth.KindLocalUser, "", in.Name, "")
	u, err := s.lookupUser(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return s.saveUser(ctx, u, "unchanged")
	}
	after := *u
	after.Disabled = true
	if err := s.keepsAnAdmin(ctx, u, &after, "disable"); err != nil {
		return nil, asError(err)
	}
	// Requests re-read the user, so its sessions and tokens are refused from
	// the next request on; sessionsValidAfter also keeps today's cookies
	// dead after the account is enabled again.
	u.Disabled = true
	s.revokeSessions(u)
	return s.saveUser(ctx, u, "disabled")
}

func (s *Server) enableUser(ctx context.Context, in *userNameIn) (*userOut, error) {
	auditObject(ctx, "enable-user", auth.KindLocalUser, "", in.Name, "")
	u, err := s.lookupUser(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	if !u.Disabled {
		return s.saveUser(ctx, u, "unchanged")
	}
	u.Disabled = false
	return s.saveUser(ctx, u, "enabled")
}

func (s *Server) resetUserPassword(ctx context.Context, in *resetPasswordIn) (*resetPasswordOut, error) {
	auditObject(ctx, "reset-password", auth.KindLocalUser, "", in.Name, "")
	u, err := s.lookupUser(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	pw, generated := in.Body.Password, false
	if pw == "" {
		if pw, err = auth.GeneratePassword(); err != nil {
			return nil, fromError(err)
		}
		generated = true
	} else if err := auth.CheckPasswordPolicy(pw); err != nil {
		return nil, errInvalid("password: %v", err)
	}
	hash, err := s.hasher.Hash(ctx, pw)
	if err != nil {
		return nil, fromError(err)
	}
	u.PasswordHash, u.MustChangePassword, u.PasswordChangedAt = hash, true, s.clock().UTC().Truncate(time.Second)
	s.revokeSessions(u)
	saved, err := s.dir.SaveUser(ctx, u, store.ManagerAPI)
	if err != nil {
		return nil, fromError(err)
	}
	s.lockout.Succeed(u.Username)
	out := &ResetPasswordAnswer{User: iamUser(saved)}
	result := "reset"
	if in.Body.RevokeTokens {
		if out.TokensRevoked, err = s.deleteUserTokens(ctx, u.Username); err != nil {
			return nil, fromError(err)
		}
		result += ", tokens revoked"
	}
	st := state(ctx)
	st.targets[len(st.targets)-1].result = result
	if generated {
		out.Password = pw
	}
	return &resetPasswordOut{Body: out}, nil
}

// revokeSessions ends every session of u issued so far: a session is valid
// only with an iat after sessionsValidAfter, and one issued just after an
// earlier revocation carries that revocation's time plus a second.
func (s *Server) revokeSessions(u *auth.LocalUser) {
	now := s.clock().UTC().Truncate(time.Second)
	next := u.SessionsValidAfter.Add(time.Second)
	if now.After(next) {
		next = now
	}
	u.SessionsValidAfter = next
}

// deleteUserTokens deletes every token of local user name and counts them.
func (s *Server) deleteUserTokens(ctx context.Context, name string) (int, error) {
	ts, err := s.dir.ListTokens(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range ts {
		if t.Owner.Kind != "User" || t.Owner.Name != name || (t.Owner.Provider != "" && t.Owner.Provider != "local") {
			continue
		}
		if err := s.dir.DeleteToken(ctx, t); err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

func (s *Server) deleteUser(ctx context.Context, in *userNameIn) (*emptyOut, error) {
	auditObject(ctx, "delete-user", auth.KindLocalUser, "", in.Name, "")
	u, err := s.lookupUser(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	if err := s.keepsAnAdmin(ctx, u, nil, "delete"); err != nil {
		return nil, asError(err)
	}
	// Tokens first: a user created again under this name must not inherit them.
	if _, err := s.deleteUserTokens(ctx, u.Username); err != nil {
		return nil, fromError(err)
	}
	if err := s.dir.DeleteUser(ctx, u); err != nil {
		return nil, fromError(err)
	}
	st := state(ctx)
	st.targets[len(st.targets)-1].result = "deleted"
	return &emptyOut{}, nil
}
