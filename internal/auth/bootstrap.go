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

// bootstrapTokenHelp says what a valid token looks like and how to get one;
// every refusal of a bootstrap token ends with it.
const bootstrapTokenHelp = "a token looks like svc_<12 lowercase letters or digits>_<43 base64url characters>; " +
	"generate one with `svc token generate` (or `svc token generate --out FILE` for SERVICE_BOOTSTRAP_TOKEN_FILE), " +
	"or unset the variable to start without a bootstrap token"

// CheckBootstrapTokenEnv refuses a SERVICE_BOOTSTRAP_TOKEN that is set but
// empty or not a token, and a SERVICE_BOOTSTRAP_TOKEN_FILE that is set but
// empty, unreadable or holds no token. A shell recipe such as
// SERVICE_BOOTSTRAP_TOKEN=$(cmd) whose command failed sets the variable to
// "": starting without the token the admin meant to install, silently,
// is the trap this check closes. lookup is os.LookupEnv or a test's.
func CheckBootstrapTokenEnv(lookup func(string) (string, bool)) error {
	v, set := lookup("SERVICE_BOOTSTRAP_TOKEN")
	if set {
		tok := strings.TrimSpace(v)
		if tok == "" {
			return errors.New("SERVICE_BOOTSTRAP_TOKEN is set but empty (did the command that should print it fail?); " + bootstrapTokenHelp)
		}
		if _, err := ParseToken(tok); err != nil {
			return fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN is not a token (%s); %s", describeBadToken(tok), bootstrapTokenHelp)
		}
		return nil
	}
	f, set := lookup("SERVICE_BOOTSTRAP_TOKEN_FILE")
	if !set {
		return nil
	}
	if strings.TrimSpace(f) == "" {
		return errors.New("SERVICE_BOOTSTRAP_TOKEN_FILE is set but empty; name a file holding one token; " + bootstrapTokenHelp)
	}
	_, err := bootstrapTokenFile(f)
	return err
}

// bootstrapTokenFile reads and checks the token of SERVICE_BOOTSTRAP_TOKEN_FILE.
func bootstrapTokenFile(f string) (string, error) {
	b, err := readSmallFile(f, 1024)
	if err != nil {
		return "", fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN_FILE: %w; %s", err, bootstrapTokenHelp)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN_FILE %s is empty; %s", f, bootstrapTokenHelp)
	}
	if _, err := ParseToken(tok); err != nil {
		return "", fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN_FILE %s holds no token (%s); %s", f, describeBadToken(tok), bootstrapTokenHelp)
	}
	return tok, nil
}

// describeBadToken says what is wrong without echoing the value, which may
// be a secret pasted into the wrong variable.
func describeBadToken(tok string) string {
	switch {
	case !strings.HasPrefix(tok, TokenPrefix):
		return fmt.Sprintf("it does not start with %s", TokenPrefix)
	case len(tok) != len(TokenPrefix)+tokenIDLen+1+tokenSecretLen:
		return fmt.Sprintf("it has %d characters, a token has %d", len(tok), len(TokenPrefix)+tokenIDLen+1+tokenSecretLen)
	default:
		return "its id or secret has characters a token never has"
	}
}

// InstallBootstrapToken installs SERVICE_BOOTSTRAP_TOKEN (or _FILE) as a token
// of the service account <namespace>/bootstrap. Without one it does nothing.
func InstallBootstrapToken(ctx context.Context, d *Directory, env Env, now time.Time) error {
	tok := strings.TrimSpace(env("SERVICE_BOOTSTRAP_TOKEN"))
	if f := env("SERVICE_BOOTSTRAP_TOKEN_FILE"); tok == "" && f != "" {
		var err error
		if tok, err = bootstrapTokenFile(f); err != nil {
			return err
		}
	}
	if tok == "" {
		return nil
	}
	id, err := ParseToken(tok)
	if err != nil {
		return fmt.Errorf("SERVICE_BOOTSTRAP_TOKEN is not a token (%s); %s", describeBadToken(tok), bootstrapTokenHelp)
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
