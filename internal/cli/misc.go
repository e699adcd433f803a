package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/auth"
)

func newAuditCmd(a *app) *cobra.Command {
	var actor, kind, name, since string
	var limit int
	cmd := &cobra.Command{
		Use: "audit", Short: "Show the audit trail of writes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := queryValues("actor", actor, "kind", kind, "name", name, "limit", strconv.Itoa(limit), "order", "desc")
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				q.Set("since", t.UTC().Format(time.RFC3339))
			}
			var page api.AuditPage
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/audit", query: q, out: &page}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, page); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tKIND\tNAME\tRESULT\tSTATUS")
			for _, e := range page.Items {
				n := e.Name
				if e.Namespace != "" {
					n = e.Namespace + "/" + e.Name
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", e.Time.UTC().Format(time.RFC3339), e.Actor.Name, e.Action, e.Kind, n, e.Result, e.Status)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&actor, "actor", "", "only events of this actor")
	f.StringVar(&kind, "kind", "", "only events of this kind")
	f.StringVar(&name, "name", "", "only events of this object name")
	f.IntVar(&limit, "limit", 100, "at most this many events")
	f.StringVar(&since, "since", "", "RFC 3339 time or a duration such as 24h")
	return cmd
}

// parseSince accepts an RFC 3339 time or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: an RFC 3339 time such as 2024-05-01T12:00:00Z, or a duration back from now such as 5m, 1h30m or 48h (days as 24h)", s)
	}
	return t, nil
}

// parseDuration parses a Go duration and, when that fails, says what one
// looks like: Go has no unit for days, which is the usual mistake.
func parseDuration(flag, v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err == nil {
		return d, nil
	}
	msg := fmt.Sprintf("%s %q: not a duration; use a number with a unit (ms, s, m, h) such as 5m, 1h30m or 90s", flag, v)
	t := strings.TrimSpace(v)
	if n, err := strconv.ParseFloat(strings.TrimRight(t, "dw"), 64); err == nil && n > 0 && strings.ContainsAny(t[len(t)-1:], "dw") {
		hours := n * 24
		if strings.HasSuffix(t, "w") {
			hours *= 7
		}
		msg += fmt.Sprintf("; there is no day or week unit: write days as hours (%s = %sh; 1d = 24h, 7d = 168h)", t, strconv.FormatFloat(hours, 'f', -1, 64))
	} else {
		msg += "; days as hours (24h)"
	}
	return 0, fmt.Errorf("%s", msg)
}

func newTokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "API token helpers"}
	var out string
	gen := &cobra.Command{
		Use:   "generate",
		Short: "Print a new token in the wire form svc_<id>_<secret> (no server needed)",
		Long:  "Generates a token for SERVICE_BOOTSTRAP_TOKEN or an internal token file. --out writes a new file with mode 0600 and refuses to overwrite.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, _, err := auth.NewToken()
			if err != nil {
				return err
			}
			if out == "" {
				_, err = fmt.Fprintln(a.stdout, tok)
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if _, err := fmt.Fprintln(f, tok); err != nil {
				f.Close()
				return fmt.Errorf("--out: %w", err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			fmt.Fprintf(a.stderr, "wrote a new token to %s\n", out)
			return nil
		},
	}
	gen.Flags().StringVar(&out, "out", "", "write to this new file (mode 0600) instead of standard output")
	cmd.AddCommand(gen, newTokenCreateCmd(a), newTokenListCmd(a), newTokenRevokeCmd(a))
	return cmd
}

// newTokenCreateCmd is `svc token create`: POST /auth/tokens for the caller,
// narrowed to --role grants. The secret goes to stdout alone (for a pipe),
// the rest to stderr.
func newTokenCreateCmd(a *app) *cobra.Command {
	var roles []string
	var desc, expires string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API token of the logged-in user or service account, narrowed to roles",
		Long: "The token belongs to the caller and holds at most the caller's grants; --role narrows it (comma-separated " +
			"or repeated: " + strings.Join(auth.Roles(), ", ") + ", or zone-admin@zone:NAME). The query log needs the " +
			"auditor role, which admin does not include: a read-only dashboard token is --role viewer,auditor. " +
			"The token is printed once on standard output; its id, roles and expiry go to standard error.",
		Example: "  svc token create --role viewer,auditor --description dashboard\n" +
			"  svc token create --role zone-admin@zone:home.lan --expires-in 720h > ci.token",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var scopes []string
			for _, r := range roles {
				r = strings.TrimSpace(r)
				if r == "" {
					continue
				}
				role, _, _ := strings.Cut(r, "@")
				if auth.RolePermissions(role) == nil {
					return fmt.Errorf("--role %q: unknown role%s; roles: %s (zone-admin takes @zone:NAME)", r, didYouMean(role, auth.Roles()), strings.Join(auth.Roles(), ", "))
				}
				if _, err := auth.ParseGrant(r); err != nil {
					return fmt.Errorf("--role: %w", err)
				}
				scopes = append(scopes, r)
			}
			if expires != "" {
				if _, err := parseDuration("--expires-in", expires); err != nil {
					return err
				}
			}
			var res api.CreatedToken
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: "/auth/tokens",
				body: api.CreateTokenRequest{Description: desc, ExpiresIn: expires, Scopes: scopes}, out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			fmt.Fprintln(a.stdout, res.Token)
			exp := "never"
			if res.ExpiresAt != nil {
				exp = res.ExpiresAt.Format(time.RFC3339)
			}
			rs := "all of the owner's"
			if len(res.Scopes) > 0 {
				rs = strings.Join(res.Scopes, ",")
			}
			fmt.Fprintf(a.stderr, "token %s of %s/%s, roles %s, expires %s (shown once; revoke with svc token revoke %s)\n",
				res.ID, res.Owner.Kind, res.Owner.Name, rs, exp, res.ID)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&roles, "role", nil, "roles of the token (comma-separated or repeated); default: all of the owner's")
	cmd.Flags().StringVar(&desc, "description", "", "what the token is for")
	cmd.Flags().StringVar(&expires, "expires-in", "", "lifetime, e.g. 720h (days as 24h multiples); default the server's auth.tokens.maxLifetime, or never")
	return cmd
}

func newTokenListCmd(a *app) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List my API tokens (--all: every token, needs tokens.read)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if all {
				q.Set("all", "true")
			}
			var page struct {
				Items []api.TokenInfo `json:"items"`
			}
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/auth/tokens", query: q, out: &page}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, page.Items); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "ID\tOWNER\tROLES\tEXPIRES\tLAST-USED\tDESCRIPTION")
			for _, t := range page.Items {
				exp, used, roles := "never", "-", "all"
				if t.ExpiresAt != nil {
					exp = t.ExpiresAt.Format(time.RFC3339)
				}
				if t.LastUsedAt != nil {
					used = t.LastUsedAt.Format(time.RFC3339)
				}
				if len(t.Scopes) > 0 {
					roles = strings.Join(t.Scopes, ",")
				}
				fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", t.ID, t.Owner.Kind, t.Owner.Name, roles, exp, used, t.Description)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every token, not only mine (needs tokens.read)")
	return cmd
}

func newTokenRevokeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use: "revoke ID...", Short: "Revoke API tokens by id", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := a.call(cmd.Context(), request{method: http.MethodDelete, path: "/auth/tokens/" + url.PathEscape(id)}); err != nil {
					return fmt.Errorf("token %s: %w", id, err)
				}
				fmt.Fprintf(a.stdout, "token %s revoked\n", id)
			}
			return nil
		},
	}
}

// nodeInfo is one row of `svc nodes`.
type nodeInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Ready   *bool  `json:"ready,omitempty"`
	Leader  bool   `json:"leader,omitempty"`
	Address string `json:"address,omitempty"`
	// SnapshotAgeSeconds, Serial, Role and Error as GET /nodes answers them.
	SnapshotAgeSeconds *float64 `json:"snapshotAgeSeconds,omitempty"`
	Serial             uint64   `json:"serial,omitempty"`
	Role               string   `json:"role,omitempty"`
	Error              string   `json:"error,omitempty"`
}

func newNodesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use: "nodes", Short: "List the nodes of the cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var page struct {
				Items []nodeInfo `json:"items"`
			}
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/nodes", out: &page}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, page.Items); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tREADY\tLEADER\tROLE\tSERIAL\tSNAPSHOT-AGE\tVERSION\tADDRESS")
			for _, n := range page.Items {
				r, age, serial, role := "-", "-", "-", n.Role
				if n.Ready != nil {
					r = strconv.FormatBool(*n.Ready)
				}
				if n.SnapshotAgeSeconds != nil {
					age = (time.Duration(*n.SnapshotAgeSeconds * float64(time.Second))).Round(time.Second).String()
				}
				if n.Serial > 0 {
					serial = strconv.FormatUint(n.Serial, 10)
				}
				if role == "" {
					role = "-"
				}
				addr := n.Address
				if n.Error != "" {
					addr += " (" + n.Error + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\t%s\t%s\n", n.Name, r, n.Leader, role, serial, age, n.Version, addr)
			}
			return tw.Flush()
		},
	}
}
