package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/svcdns/svc/internal/store"
)

// AdminUsername is the first-boot administrator account.
const AdminUsername = "admin"

// BootstrapResult reports what EnsureAdmin did.
type BootstrapResult struct {
	Created bool
	// GeneratedPassword is set once, when the password was generated; the
	// caller prints it once and never logs it.
	GeneratedPassword string
	// Lost is true when another replica created the account first.
	Lost bool
}

// EnsureAdmin creates the built-in administrator on first boot. The password
// comes from SERVICE_ADMIN_PASSWORD, SERVICE_ADMIN_PASSWORD_FILE or
// passwordFile; otherwise one is generated and mustChangePassword is set.
// Each replica applies as its own manager, so a replica losing the race gets
// a managed-by refusal and does not overwrite the winner's account.
func EnsureAdmin(ctx context.Context, d *Directory, h *Hasher, env Env, passwordFile, node string, now time.Time) (BootstrapResult, error) {
	if _, err := d.GetUser(ctx, AdminUsername); err == nil {
		return BootstrapResult{}, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return BootstrapResult{}, fmt.Errorf("bootstrap admin: %w", err)
	}
	pw := env("SERVICE_ADMIN_PASSWORD")
	if pw == "" {
		f := env("SERVICE_ADMIN_PASSWORD_FILE")
		if f == "" {
			f = passwordFile
		}
		if f != "" {
			b, err := readSmallFile(f, MaxPasswordLen+2)
			if err != nil {
				return BootstrapResult{}, fmt.Errorf("bootstrap admin password file: %w", err)
			}
			pw = strings.TrimRight(string(b), "\r\n")
		}
	}
	var res BootstrapResult
	must := false
	if pw == "" {
		var err error
		if pw, err = GeneratePassword(); err != nil {
			return BootstrapResult{}, err
		}
		res.GeneratedPassword, must = pw, true
	}
	hash, err := h.Hash(ctx, pw)
	if err != nil {
		return BootstrapResult{}, fmt.Errorf("bootstrap admin: %w", err)
	}
	u := &LocalUser{Username: AdminUsername, PasswordHash: hash, BuiltinAdmin: true,
		MustChangePassword: must, PasswordChangedAt: now}
	_, err = d.SaveUser(ctx, u, store.Manager("bootstrap:"+node))
	var mb *store.ManagedByError
	if errors.As(err, &mb) || errors.Is(err, store.ErrConflict) {
		return BootstrapResult{Lost: true}, nil
	}
	if err != nil {
		return BootstrapResult{}, fmt.Errorf("bootstrap admin: %w", err)
	}
	res.Created = true
	return res, nil
}

// BootstrapServiceAccount is the built-in account owning SERVICE_BOOTSTRAP_TOKEN.
const BootstrapServiceAccount = "bootstrap"

// BreakGlassServiceAccount owns admin-socket tokens created without a user.
const BreakGlassServiceAccount = "break-glass"

// InstallBootstrapToken installs SERVICE_BOOTSTRAP_TOKEN (or _FILE) as a token
// of the service account <namespace>/bootstrap. Without one it does nothing.
func InstallBootstrapToken(ctx context.Context, d *Directory, env Env, now time.Time) error {
	tok := strings.TrimSpace(env("SERVICE_BOOTSTRAP_TOKEN"))
	if f := env("SERVICE_BOOTSTRAP_TOKEN_FILE"); tok == "" && f != "" {
		b, err := readSmallFile(f, 1024)
		if err != nil {
			return fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN_FILE: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok == "" {
		return nil
	}
	id, err := ParseToken(tok)
	if err != nil {
		return fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN: %w", err)
	}
	m := store.Manager("bootstrap")
	if err := d.EnsureBuiltinServiceAccount(ctx, BootstrapServiceAccount, m); err != nil {
		return err
	}
	if old, err := d.GetToken(ctx, id); err == nil {
		if TokenMatches(tok, old.Hash) {
			return nil
		}
		return fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN: token id %s is taken by another token", id)
	}
	_, err = d.CreateToken(ctx, &Token{
		ID: id, Hash: HashToken(tok), CreatedAt: now, Description: "bootstrap token",
		Owner: TokenOwner{Kind: "ServiceAccount", Name: BootstrapServiceAccount, Namespace: d.ns},
	}, m)
	var mb *store.ManagedByError
	if errors.As(err, &mb) || errors.Is(err, store.ErrConflict) {
		return nil // another replica installed it
	}
	return err
}
