package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/svcdns/svc/dataplane/probe"
)

func opsURL(addr, path string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/") + path
	}
	return "http://" + addr + path
}

func newHealthCmd(a *app) *cobra.Command {
	var dnsAddr, opsAddr, qname string
	var ready bool
	var timeout time.Duration
	var requireBackends int
	var dnsdistAPI, vrrpRunDir string
	var vrrp bool
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Probe a running instance (ops listener, and the health name over DNS with --dns)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			path := "/healthz/live"
			if ready {
				path = "/healthz/ready"
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, opsURL(opsAddr, path), nil)
			if err != nil {
				return err
			}
			res, err := (&http.Client{Timeout: timeout}).Do(req)
			if err != nil {
				return fmt.Errorf("health %s: %w", path, err)
			}
			body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("health %s: HTTP %d %s", path, res.StatusCode, strings.TrimSpace(string(body)))
			}
			fmt.Fprintf(a.stdout, "%s: ok\n", path)
			if dnsAddr != "" {
				rcode, err := probe.Query(ctx, dnsAddr, qname, "TXT", timeout)
				if err != nil {
					return fmt.Errorf("health name %s at %s: %w", qname, dnsAddr, err)
				}
				if rcode != "NOERROR" {
					return fmt.Errorf("health name %s at %s: %s", qname, dnsAddr, rcode)
				}
				fmt.Fprintf(a.stdout, "dns %s %s: %s\n", dnsAddr, qname, rcode)
			}
			if dnsdistAPI != "" {
				if err := edgeHealth(ctx, a, dnsdistAPI, requireBackends, timeout); err != nil {
					return err
				}
			}
			if vrrp {
				if err := vrrpHealth(ctx, a, vrrpRunDir); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dnsAddr, "dns", "", "also query the health name at this DNS address (host:port)")
	f.StringVar(&opsAddr, "ops-address", "127.0.0.1:8081", "ops listener address")
	f.StringVar(&qname, "qname", "health.service.internal.", "health name to query with --dns")
	f.BoolVar(&ready, "ready", false, "check readiness instead of liveness")
	f.DurationVar(&timeout, "timeout", 3*time.Second, "time limit of the probe")
	f.IntVar(&requireBackends, "require-backends", 1, "with --dnsdist-api: backends that must be up")
	f.StringVar(&dnsdistAPI, "dnsdist-api", "", "also probe a running edge (svc edge run) through dnsdist's API at this address")
	f.BoolVar(&vrrp, "vrrp", false, "also report the VRRP instances' states (svc vip run)")
	f.StringVar(&vrrpRunDir, "vip-run-dir", "/run/service", "with --vrrp: run directory of the VIP supervisor")
	return cmd
}

func newLameduckCmd(a *app) *cobra.Command {
	var cancelLD bool
	var opsAddr string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "lameduck [DURATION]",
		Short: "Put the local node in lameduck (not ready, still serving), or --cancel it",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			switch {
			case cancelLD:
				if len(args) > 0 {
					return errors.New("--cancel takes no duration")
				}
				body["cancel"] = true
			case len(args) == 1:
				if _, err := parseDuration("duration", args[0]); err != nil {
					return err
				}
				body["duration"] = args[0]
			}
			b, _ := json.Marshal(body)
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, opsURL(opsAddr, "/lameduck"), bytes.NewReader(b))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := (&http.Client{Timeout: timeout}).Do(req)
			if err != nil {
				return fmt.Errorf("lameduck: %w", err)
			}
			defer res.Body.Close()
			out, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
			if res.StatusCode >= 300 {
				return decodeAPIError(res.StatusCode, out, opsAddr)
			}
			if len(bytes.TrimSpace(out)) > 0 {
				if ok, err := writeData(a.stdout, a.g.Output, json.RawMessage(out)); ok {
					return err
				}
			}
			if cancelLD {
				fmt.Fprintln(a.stdout, "lameduck cancelled")
			} else {
				fmt.Fprintln(a.stdout, "lameduck started")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&cancelLD, "cancel", false, "leave lameduck and serve normally")
	cmd.Flags().StringVar(&opsAddr, "ops-address", "127.0.0.1:8081", "ops listener address (loopback)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "time limit of the request")
	return cmd
}
