package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
)

// Backup routes: what `svc backup` needs beyond /objects (the settings made
// through the API, and local users, which /objects never serves because
// they carry password hashes) and what `svc restore` needs to put users
// back. Objects themselves go through GET /objects and POST /apply.

// SettingsOverrides is the optional part of SettingsService that backup
// reads: the cluster-scope keys set through the API (the settings file),
// by dotted key. Defaults, the config file and the environment belong to
// the host, not to a backup.
type SettingsOverrides interface {
	Overrides(ctx context.Context) (map[string]any, error)
}

// BackupSettings is the answer of GET /backup/settings.
type BackupSettings struct {
	// Values are the cluster-scope keys set through the API, dotted
	// (blocking.enabled); PATCH /settings takes them back as they are.
	Values map[string]any `json:"values"`
	TookMS float64        `json:"took_ms"`
}

func (b *BackupSettings) setTook(ms float64) { b.TookMS = ms }

// BackupUser is a local user as a backup holds it.
type BackupUser struct {
	Username     string   `json:"username"`
	DisplayName  string   `json:"displayName,omitempty"`
	Groups       []string `json:"groups,omitempty"`
	Disabled     bool     `json:"disabled,omitempty"`
	BuiltinAdmin bool     `json:"builtinAdmin,omitempty"`
	// PasswordHash is there only when the backup was asked for secrets.
	PasswordHash       string `json:"passwordHash,omitempty"`
	MustChangePassword bool   `json:"mustChangePassword,omitempty"`
}

// UserRestoreResult reports one restored user.
type UserRestoreResult struct {
	Username string `json:"username"`
	Result   string `json:"result" enum:"created,updated,unchanged"`
	// NeedsPassword: the user has no password on this node yet (restored
	// without secrets); an administrator sets one with
	// `svc admin reset-password NAME` and the user changes it at first login.
	NeedsPassword bool `json:"needsPassword,omitempty"`
}

type backupSettingsOut struct{ Body *BackupSettings }

type backupUsersIn struct {
	Secrets bool `query:"secrets" doc:"include password hashes (needs users.write besides users.read)"`
}

type backupUsersOut struct{ Body *ListBody[BackupUser] }

type restoreUsersIn struct {
	Body struct {
		Items []BackupUser `json:"items"`
	}
}

type restoreUsersOut struct{ Body *ListBody[UserRestoreResult] }

func (s *Server) registerBackupRoutes() {
	tags := []string{"backup"}
	register(s, huma.Operation{OperationID: "backup-settings", Method: http.MethodGet, Path: "/backup/settings",
		Summary: "Cluster settings set through the API, for svc backup", Tags: tags},
		clusterPerm("settings.read"), func(ctx context.Context, _ *emptyIn) (*backupSettingsOut, error) {
			ss := s.deps.Settings
			if vs, ok := ss.(visibleSettings); ok {
				ss = vs.SettingsService
			}
			o, ok := ss.(SettingsOverrides)
			if !ok {
				return nil, errNotImplemented("settings backup")
			}
			vals, err := o.Overrides(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			if vals == nil {
				vals = map[string]any{}
			}
			return &backupSettingsOut{Body: &BackupSettings{Values: vals}}, nil
		})
	register(s, huma.Operation{OperationID: "backup-users", Method: http.MethodGet, Path: "/backup/users",
		Summary: "Local users for svc backup (password hashes only with secrets=true)", Tags: tags},
		clusterPerm("users.read"), func(ctx context.Context, in *backupUsersIn) (*backupUsersOut, error) {
			if in.Secrets {
				// Hashes are credentials: reading them takes the right to set them.
				if p := state(ctx).principal; p == nil || !s.authz.Authorize(ctx, p, "users.write", auth.ClusterScope).Allowed {
					return nil, errForbidden("users.write")
				}
			}
			users, err := s.dir.ListUsers(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			out := &ListBody[BackupUser]{Items: make([]BackupUser, 0, len(users))}
			for _, u := range users {
				b := BackupUser{Username: u.Username, DisplayName: u.DisplayName, Groups: u.Groups, Disabled: u.Disabled,
					BuiltinAdmin: u.BuiltinAdmin, MustChangePassword: u.MustChangePassword}
				if in.Secrets {
					b.PasswordHash = u.PasswordHash
				}
				out.Items = append(out.Items, b)
			}
			return &backupUsersOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "restore-users", Method: http.MethodPost, Path: "/backup/users",
		Summary: "Create or update local users from a backup", Tags: tags, MaxBodyBytes: maxBulkBody},
		clusterPerm("users.write"), func(ctx context.Context, in *restoreUsersIn) (*restoreUsersOut, error) {
			out := &ListBody[UserRestoreResult]{Items: []UserRestoreResult{}}
			for _, b := range in.Body.Items {
				r, err := s.restoreUser(ctx, b)
				if err != nil {
					return nil, err
				}
				auditObject(ctx, "restore", auth.KindLocalUser, "", b.Username, r.Result)
				out.Items = append(out.Items, r)
			}
			return &restoreUsersOut{Body: out}, nil
		})
}

// restoreUser creates a missing user (without a password unless the backup
// holds its hash) or brings an existing one's profile in line with the
// backup; an existing password is never replaced by an empty one.
func (s *Server) restoreUser(ctx context.Context, b BackupUser) (UserRestoreResult, error) {
	r := UserRestoreResult{Username: b.Username}
	if b.Username == "" {
		return r, errInvalid("items: a user without username")
	}
	u, err := s.dir.GetUser(ctx, b.Username)
	switch {
	case errors.Is(err, store.ErrNotFound):
		u = &auth.LocalUser{Username: b.Username, DisplayName: b.DisplayName, Groups: b.Groups, Disabled: b.Disabled,
			BuiltinAdmin: b.BuiltinAdmin, PasswordHash: b.PasswordHash, MustChangePassword: b.MustChangePassword || b.PasswordHash == ""}
		if b.PasswordHash != "" {
			u.PasswordChangedAt = s.clock()
		}
		if _, err := s.dir.SaveUser(ctx, u, store.ManagerAPI); err != nil {
			return r, fromError(err)
		}
		r.Result, r.NeedsPassword = "created", b.PasswordHash == ""
		return r, nil
	case err != nil:
		return r, fromError(err)
	}
	same := u.DisplayName == b.DisplayName && slices.Equal(u.Groups, b.Groups) && u.Disabled == b.Disabled &&
		u.BuiltinAdmin == b.BuiltinAdmin && (b.PasswordHash == "" || b.PasswordHash == u.PasswordHash)
	r.NeedsPassword = u.PasswordHash == "" && b.PasswordHash == ""
	if same {
		r.Result = "unchanged"
		return r, nil
	}
	u.DisplayName, u.Groups, u.Disabled, u.BuiltinAdmin = b.DisplayName, b.Groups, b.Disabled, b.BuiltinAdmin
	if b.PasswordHash != "" && b.PasswordHash != u.PasswordHash {
		u.PasswordHash, u.MustChangePassword, u.PasswordChangedAt = b.PasswordHash, b.MustChangePassword, s.clock()
		// sessions and cookies of the old password end
		u.SessionsValidAfter = s.clock().Add(-time.Second)
	}
	if _, err := s.dir.SaveUser(ctx, u, store.ManagerAPI); err != nil {
		return r, fromError(err)
	}
	r.Result = "updated"
	return r, nil
}
