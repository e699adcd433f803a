package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

type loginOpts struct {
	tokenStdin    bool
	username      string
	password      string
	passwordStdin bool
	newPwStdin    bool
	name          string
	defaultNS     string
	tokenName     string
	tokenExpires  string
}

func newLoginCmd(a *app) *cobra.Command {
	o := &loginOpts{}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in to a server and save it as a context",
		Long: "Log in with an API token (--token or --token-stdin, verified with GET /auth/me) or with a " +
			"username and password (a new API token is created for the CLI). The token is stored in the OS keyring " +
			"(Secret Service on Linux, Keychain on macOS, Credential Manager on Windows); when the keyring fails it goes to the " +
			"client configuration file (mode 0600) and the CLI says so on stderr. SERVICE_KEYRING=file skips the keyring.\n\n" +
			"When the server requires a new password (the generated administrator password of the first start, or one " +
			"set by `svc admin reset-password`), login asks for it twice without echo on a terminal; without a terminal " +
			"pass --new-password-stdin and give it as the next line of standard input (after the current password with " +
			"--password-stdin). Without -p or --password-stdin login asks for the password on a terminal.",
		Example: "  svc login --server https://127.0.0.1:8080 --ca-file .run/tls/ca.pem -u admin\n" +
			"  printf '%s\\n%s\\n' \"$GENERATED\" \"$NEW\" | svc login --server URL -u admin --password-stdin --new-password-stdin\n" +
			"  svc login --server URL --token-stdin < token.txt",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.login(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.tokenStdin, "token-stdin", false, "read the API token from standard input")
	f.StringVarP(&o.username, "username", "u", "", "local user name")
	f.StringVarP(&o.password, "password", "p", "", "password (prefer --password-stdin)")
	f.BoolVar(&o.passwordStdin, "password-stdin", false, "read the password from standard input")
	f.BoolVar(&o.newPwStdin, "new-password-stdin", false, "when the server requires a new password, read it from the next line of standard input")
	f.StringVar(&o.name, "name", "", "context name (default: the server's host:port)")
	f.StringVar(&o.defaultNS, "default-namespace", "", "namespace of the context")
	f.StringVar(&o.tokenName, "token-name", "", "description of the created token (default service-cli@<hostname>)")
	f.StringVar(&o.tokenExpires, "token-expires-in", "", "lifetime of the created token, e.g. 720h (default: the server's maximum, or never)")
	return cmd
}

func readSecret(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (a *app) login(ctx context.Context, o *loginOpts) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	prev, _ := a.currentContext(cfg)
	if o.name != "" {
		prev = cfg.find(o.name)
	}
	server := a.g.Server
	if server == "" && prev != nil {
		server = prev.Server
	}
	server, err = normalizeServer(server)
	if err != nil {
		return err
	}
	tlsOpts := TLSOptions{CAFile: a.g.CAFile, Insecure: a.g.InsecureSkipTLSVerify}
	tok := a.g.Token
	if o.tokenStdin {
		if tok, err = readSecret(a.stdin); err != nil {
			return err
		}
	}
	user := ""
	tokenID := ""
	switch {
	case o.username != "":
		pw := o.password
		if o.passwordStdin {
			if pw, err = a.secrets().line("password"); err != nil {
				return err
			}
		} else if pw == "" {
			p, ok, err := a.secrets().prompt("Password for " + o.username + ": ")
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("a password is required: pass --password-stdin (or -p), or run on a terminal to be asked")
			}
			pw = p
		}
		if pw == "" {
			return errors.New("a password is required: pass -p or --password-stdin")
		}
		created, err := a.passwordLogin(ctx, server, tlsOpts, o, pw)
		if err != nil {
			return err
		}
		tok, tokenID, user = created.Token, created.ID, o.username
	case tok == "":
		return errors.New("pass --token, --token-stdin or -u USERNAME with -p/--password-stdin")
	}
	c, err := a.clientFor(server, tok, tlsOpts)
	if err != nil {
		return err
	}
	var me api.MeBody
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/auth/me", out: &me}); err != nil {
		return fmt.Errorf("verifying the token: %w", err)
	}
	if user == "" {
		user = me.Principal.Name
	}
	if tokenID == "" {
		tokenID = me.Principal.TokenID
	}
	name := o.name
	if name == "" {
		u, _ := url.Parse(server)
		name = u.Host
	}
	cx := cfg.upsert(name)
	cx.Server, cx.User, cx.TokenID = server, user, tokenID
	cx.CAFile, cx.InsecureSkipTLSVerify = a.g.CAFile, a.g.InsecureSkipTLSVerify
	if o.defaultNS != "" {
		cx.DefaultNamespace = o.defaultNS
	}
	ts := a.tokens(cfg)
	if err := ts.set(cx, tok); err != nil {
		return err
	}
	cfg.CurrentContext = name
	if err := cfg.save(a.g.CLIConfig); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "logged in to %s as %s; context %q (token stored in %s)\n", server, user, name, ts.backend())
	if me.MustChangePassword {
		fmt.Fprintln(a.stderr, "warning: the password must be changed before other verbs answer: run `svc passwd`")
	}
	return nil
}

// passwordLogin logs in with a session and creates an API token with it.
func (a *app) passwordLogin(ctx context.Context, server string, tlsOpts TLSOptions, o *loginOpts, pw string) (*api.CreatedToken, error) {
	c, err := a.clientFor(server, "", tlsOpts)
	if err != nil {
		return nil, err
	}
	jar, _ := cookiejar.New(nil)
	c.HTTP.Jar = jar
	var me api.MeBody
	body := map[string]string{"username": o.username, "password": pw}
	// Cross-origin protection: a non-browser client sends no Origin and no
	// Sec-Fetch-Site, which the server accepts as same-origin.
	if err := c.Do(ctx, request{method: http.MethodPost, path: "/auth/login", body: body, out: &me}); err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	if me.MustChangePassword {
		// No other route answers until the password is changed: change it
		// now, with the session just opened, and go on with the fresh one.
		fmt.Fprintf(a.stderr, "the password of %s must be changed before first use\n", o.username)
		next, err := a.secrets().newPassword(o.newPwStdin)
		if errors.Is(err, errNoNewPassword) {
			return nil, fmt.Errorf("the password of %s must be changed first: run on a terminal to be asked, or pass --new-password-stdin "+
				"with the new password as the next line of standard input (after the current one with --password-stdin)", o.username)
		}
		if err != nil {
			return nil, err
		}
		changed, err := changePassword(ctx, c, me.CSRF, pw, next, false)
		if err != nil {
			return nil, err
		}
		me = *changed
		fmt.Fprintf(a.stderr, "password of %s changed\n", o.username)
	}
	desc := o.tokenName
	if desc == "" {
		host, _ := os.Hostname()
		desc = "service-cli@" + host
	}
	var created api.CreatedToken
	err = c.Do(ctx, request{method: http.MethodPost, path: "/auth/tokens",
		body:   api.CreateTokenRequest{Description: desc, ExpiresIn: o.tokenExpires},
		header: http.Header{"X-Service-CSRF": {me.CSRF}}, out: &created})
	if err != nil {
		return nil, fmt.Errorf("creating a token: %w", err)
	}
	// The session is not needed any more.
	_ = c.Do(ctx, request{method: http.MethodPost, path: "/auth/logout", header: http.Header{"X-Service-CSRF": {me.CSRF}}})
	return &created, nil
}

func newLogoutCmd(a *app) *cobra.Command {
	var remove bool
	cmd := &cobra.Command{
		Use:               "logout [context]",
		Short:             "Revoke and forget the token of a context",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			var cx *Context
			if len(args) == 1 {
				if cx = cfg.find(args[0]); cx == nil {
					return fmt.Errorf("context %q not found", args[0])
				}
			} else if cx, err = a.currentContext(cfg); err != nil {
				return err
			} else if cx == nil {
				return errors.New("no current context; name one")
			}
			ts := a.tokens(cfg)
			tok, _ := ts.get(cx)
			if tok != "" && cx.TokenID != "" {
				c, err := a.clientFor(cx.Server, tok, TLSOptions{CAFile: cx.CAFile, Insecure: cx.InsecureSkipTLSVerify})
				if err == nil {
					if err := c.Do(cmd.Context(), request{method: http.MethodDelete, path: "/auth/tokens/" + url.PathEscape(cx.TokenID)}); err != nil {
						fmt.Fprintf(a.stderr, "warning: revoking token %s: %v\n", cx.TokenID, err)
					}
				}
			}
			if err := ts.del(cx); err != nil {
				return err
			}
			name := cx.Name
			cx.TokenID = ""
			if remove {
				cfg.remove(name)
			}
			if err := cfg.save(a.g.CLIConfig); err != nil {
				return err
			}
			if remove {
				fmt.Fprintf(a.stdout, "logged out; context %q removed\n", name)
			} else {
				fmt.Fprintf(a.stdout, "logged out of context %q\n", name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&remove, "remove", false, "also remove the context")
	return cmd
}
