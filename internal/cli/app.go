package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/validation"
)

// app is the state one invocation shares between verbs: flags, streams and
// lazily built collaborators. It lives as long as one command tree.
type app struct {
	g      *Globals
	env    Env
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	kinds *validation.Validator

	// secretReader reads passwords from stdin or a terminal (secrets).
	secretReader *secrets

	// envResolved is set once resolveEnv filled the flags from the environment.
	envResolved bool

	// keyring replaces the OS keyring in tests; keyringWarned is set once
	// the fallback to the config file was reported.
	keyring       Keyring
	keyringWarned bool
}

// kindRegistry builds the kind table once per invocation.
func (a *app) kindRegistry() (*validation.Validator, error) {
	if a.kinds == nil {
		v, err := validation.New()
		if err != nil {
			return nil, fmt.Errorf("kinds: %w", err)
		}
		a.kinds = v
	}
	return a.kinds, nil
}

// resolveKind accepts a kind, plural, singular or short name.
func (a *app) resolveKind(name string) (validation.KindInfo, error) {
	v, err := a.kindRegistry()
	if err != nil {
		return validation.KindInfo{}, err
	}
	ki, ok := v.KindInfo(name)
	if !ok {
		var names []string
		for _, k := range v.Kinds() {
			if !k.Internal {
				names = append(names, k.Plural)
			}
		}
		return ki, fmt.Errorf("unknown kind %q%s; known: %s", name, didYouMean(name, names), strings.Join(names, ", "))
	}
	return ki, nil
}

func (a *app) config() (*ClientConfig, error) {
	a.resolveEnv()
	return loadClientConfig(a.g.CLIConfig)
}

// currentContext returns the selected context (nil when none).
func (a *app) currentContext(cfg *ClientConfig) (*Context, error) {
	name := a.g.Context
	if name == "" {
		name = cfg.CurrentContext
	}
	if name == "" {
		return nil, nil
	}
	c := cfg.find(name)
	if c == nil {
		return nil, fmt.Errorf("context %q not found in %s", name, a.g.CLIConfig)
	}
	return c, nil
}

// namespace is -n, else the context's default, else default.
func (a *app) namespace() string {
	if a.g.Namespace != "" {
		return a.g.Namespace
	}
	if cfg, err := a.config(); err == nil {
		if c, _ := a.currentContext(cfg); c != nil && c.DefaultNamespace != "" {
			return c.DefaultNamespace
		}
	}
	return "default"
}

// client builds the API client: server from --server / SERVICE_SERVER /
// context, token from --token / SERVICE_TOKEN / the token store.
func (a *app) client() (*Client, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	cur, err := a.currentContext(cfg)
	if err != nil {
		return nil, err
	}
	server, tok := a.g.Server, a.g.Token
	tlsOpts := TLSOptions{CAFile: a.g.CAFile, Insecure: a.g.InsecureSkipTLSVerify}
	if cur != nil {
		if server == "" {
			server = cur.Server
		}
		if tok == "" && strings.TrimRight(server, "/") == strings.TrimRight(cur.Server, "/") {
			tok, err = a.tokens(cfg).get(cur)
			if err != nil {
				return nil, err
			}
		}
		if tlsOpts.CAFile == "" {
			tlsOpts.CAFile = cur.CAFile
		}
		tlsOpts.Insecure = tlsOpts.Insecure || cur.InsecureSkipTLSVerify
	}
	return a.clientFor(server, tok, tlsOpts)
}

func (a *app) clientFor(server, tok string, tlsOpts TLSOptions) (*Client, error) {
	server, err := normalizeServer(server)
	if err != nil {
		return nil, err
	}
	hc, err := newHTTPClient(tlsOpts, a.g.RequestTimeout)
	if err != nil {
		return nil, err
	}
	return &Client{Server: server, Base: server + "/api/v1", Token: tok, HTTP: hc, Warnings: a.stderr}, nil
}

// call is a shortcut: build the client and send one request.
func (a *app) call(ctx context.Context, r request) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	return c.Do(ctx, r)
}

// printErr writes an error with the server's message and hint.
func printErr(w io.Writer, err error) {
	var ae *APIError
	if errors.As(err, &ae) {
		fmt.Fprintf(w, "error: %s\n", err.Error())
		for _, o := range ae.Objects {
			fmt.Fprintf(w, "  %s: %s", objectRef(o.Kind, o.Namespace, o.Name), o.Error)
			if o.Hint != "" {
				fmt.Fprintf(w, " (hint: %s)", o.Hint)
			}
			fmt.Fprintln(w)
		}
		if ae.Missing != "" {
			fmt.Fprintf(w, "missing permission: %s\n", ae.Missing)
		}
		if ae.Hint != "" {
			fmt.Fprintf(w, "hint: %s\n", ae.Hint)
		}
		if ae.Status == 401 {
			srv := ae.Server
			if srv == "" {
				srv = "URL"
			}
			fmt.Fprintf(w, "to log in: svc login --server %s -u USERNAME (or --token-stdin), or pass --token / SERVICE_TOKEN\n", srv)
		}
		return
	}
	fmt.Fprintf(w, "error: %v\n", err)
}

func objectRef(kind, ns, name string) string {
	k := strings.ToLower(kind)
	if ns != "" {
		return k + "/" + ns + "/" + name
	}
	return k + "/" + name
}

// noArgsOr returns cobra's arg validator with a usage hint.
func exactArgs(n int) cobra.PositionalArgs { return cobra.ExactArgs(n) }
