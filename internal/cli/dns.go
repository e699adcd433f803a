package cli

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

func newQueryCmd(a *app) *cobra.Command {
	var client, proto string
	var dnssec bool
	cmd := &cobra.Command{
		Use:   "query NAME [TYPE]",
		Short: "Resolve a name through the server's pipeline as a client would",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.DNSQueryRequest{Name: args[0], Client: client, DNSSEC: dnssec, Proto: proto}
			if len(args) == 2 {
				req.Type = strings.ToUpper(args[1])
			}
			var res api.DNSQueryResult
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: "/dns/query", body: req, out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			w := a.stdout
			fmt.Fprintf(w, "%s %s from %s: %s (%s, %s) in %.1f ms on %s\n", res.Name, res.Type, res.Client, res.Rcode, res.Status, res.StatusClass, res.LatencyMS, res.Node)
			if res.List != "" || res.Rule != "" {
				fmt.Fprintf(w, "list: %s  rule: %s\n", res.List, res.Rule)
			}
			if res.Upstream != "" {
				fmt.Fprintf(w, "upstream: %s\n", res.Upstream)
			}
			if res.Error != "" {
				fmt.Fprintf(w, "error: %s\n", res.Error)
			}
			for _, s := range []struct {
				title string
				rrs   []string
			}{{"ANSWER", res.Answer}, {"AUTHORITY", res.Authority}, {"ADDITIONAL", res.Additional}} {
				if len(s.rrs) == 0 {
					continue
				}
				fmt.Fprintf(w, ";; %s\n", s.title)
				for _, rr := range s.rrs {
					fmt.Fprintln(w, rr)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&client, "client", "", "client address or ID to resolve as")
	cmd.Flags().StringVar(&proto, "proto", "", "transport to pretend: udp, tcp, dot, doh, doq, doh3")
	cmd.Flags().BoolVar(&dnssec, "dnssec", false, "set the DO bit")
	return cmd
}

func (a *app) printBlocking(st api.BlockingState) error {
	if ok, err := writeData(a.stdout, a.g.Output, st); ok {
		return err
	}
	state := "enabled"
	if !st.Blocking {
		state = "disabled"
	}
	fmt.Fprintf(a.stdout, "blocking %s on %s (scope %s)", state, st.Node, st.Scope)
	if st.Until != nil {
		fmt.Fprintf(a.stdout, " until %s", st.Until.Format(time.RFC3339))
	}
	fmt.Fprintln(a.stdout)
	return nil
}

func newBlockingCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "blocking", Short: "Toggle blocking on the node temporarily"}
	set := func(cmd *cobra.Command, req api.BlockingRequest) error {
		var st api.BlockingState
		if err := a.call(cmd.Context(), request{method: http.MethodPost, path: "/dns/blocking", body: req, out: &st}); err != nil {
			return err
		}
		return a.printBlocking(st)
	}
	enable := &cobra.Command{
		Use: "enable", Short: "Enable blocking again", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return set(cmd, api.BlockingRequest{Blocking: true})
		},
	}
	var until string
	disable := &cobra.Command{
		Use: "disable [DURATION]", Short: "Disable blocking, for a duration or until a time", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.BlockingRequest{Blocking: false}
			if len(args) == 1 {
				if _, err := parseDuration("duration", args[0]); err != nil {
					return err
				}
				req.Duration = args[0]
			}
			if until != "" {
				if req.Duration != "" {
					return errors.New("give a duration or --until, not both")
				}
				t, err := time.Parse(time.RFC3339, until)
				if err != nil {
					return fmt.Errorf("--until: %w", err)
				}
				req.Until = &t
			}
			return set(cmd, req)
		},
	}
	disable.Flags().StringVar(&until, "until", "", "RFC 3339 time when blocking comes back")
	status := &cobra.Command{
		Use: "status", Short: "Show the blocking toggle of the node", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st api.BlockingState
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/dns/blocking", out: &st}); err != nil {
				return err
			}
			return a.printBlocking(st)
		},
	}
	cmd.AddCommand(enable, disable, status)
	return cmd
}

func newCacheCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Manage the DNS cache"}
	cmd.AddCommand(&cobra.Command{
		Use: "flush [NAME]", Short: "Flush the whole cache or one name", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]string{}
			what := "cache"
			if len(args) == 1 {
				body["name"] = args[0]
				what = args[0]
			}
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: "/cache/flush", body: body}); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "flushed %s\n", what)
			return nil
		},
	})
	return cmd
}
