package cli

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
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
		return time.Time{}, fmt.Errorf("--since %q: an RFC 3339 time or a duration", s)
	}
	return t, nil
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
	cmd.AddCommand(gen)
	return cmd
}

// nodeInfo is one row of `svc nodes`.
type nodeInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Ready   *bool  `json:"ready,omitempty"`
	Leader  bool   `json:"leader,omitempty"`
	Address string `json:"address,omitempty"`
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
			fmt.Fprintln(tw, "NAME\tREADY\tLEADER\tVERSION\tADDRESS")
			for _, n := range page.Items {
				r := "-"
				if n.Ready != nil {
					r = strconv.FormatBool(*n.Ready)
				}
				fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\n", n.Name, r, n.Leader, n.Version, n.Address)
			}
			return tw.Flush()
		},
	}
}
