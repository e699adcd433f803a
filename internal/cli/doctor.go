package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/doctor"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/version"
)

func newDoctorCmd(a *app) *cobra.Command {
	var skipAPI, skipPorts bool
	var keepalived, vipRunDir, edgeConfig string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check configuration, data directory, ports, API, token, the node's own report and diagnoses",
		Long: "Checks this host (config file, node.dataDir, listener ports, VRRP files) and, unless --skip-api, the\n" +
			"server of the current context: that it answers, that the token is accepted, and the node's own\n" +
			"report (GET /api/v1/doctor: its config file, data directory, listeners, readiness, restart-pending\n" +
			"settings, diagnoses; its checks are named node/<check>). Ports held by the node the API reached on\n" +
			"this host count as free. -o json prints the DoctorReport. Exit 1 when a check fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			rep := &doctor.Report{Version: version.Version}
			rep.Node, _ = os.Hostname()
			mgr, err := settings.Load(cmd.Context(), settings.Options{ConfigPath: a.g.Config, ConfigPathExplicit: cmd.Flags().Changed("config"), Environ: os.Environ()})
			var cfg *settings.Config
			if err != nil {
				rep.Add("config", doctor.Fail, "%v", err)
			} else {
				cfg = mgr.Current()
				if cfg.Node.Name != "" {
					rep.Node = cfg.Node.Name
				}
				rep.Add("config", doctor.OK, "%s loads", mgr.ConfigPath())
				doctor.DataDir(rep, cfg.Node.DataDir)
			}
			var node *doctor.Report
			local := false
			if !skipAPI {
				node, local = a.doctorAPI(cmd, rep)
			}
			if cfg != nil && !skipPorts {
				var held func(doctor.Listener) bool
				switch {
				case opsAnswers(cfg.Listeners.Ops.Address):
					// A node runs with this config: it bound every listener.
					held = func(doctor.Listener) bool { return true }
				case node != nil && local:
					held = doctor.HeldBy(node)
				}
				doctor.Ports(rep, doctor.Listeners(cfg), held)
			}
			if keepalived != "" {
				doctorVRRP(cmd.Context(), rep, keepalived, vipRunDir)
			}
			if edgeConfig != "" {
				doctorEdge(cmd.Context(), rep, edgeConfig)
			}
			if node != nil {
				for _, c := range node.Checks {
					rep.Checks = append(rep.Checks, doctor.Check{Check: "node/" + c.Check, Status: c.Status, Message: c.Message})
				}
			}
			rep.Finish(start)
			if ok, err := writeData(a.stdout, a.g.Output, rep); ok {
				if err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
				fmt.Fprintln(tw, "CHECK\tSTATUS\tMESSAGE")
				for _, c := range rep.Checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Check, c.Status, c.Message)
				}
				_ = tw.Flush()
			}
			if rep.Failures > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d checks failed", rep.Failures)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&skipAPI, "skip-api", false, "do not contact the API")
	cmd.Flags().BoolVar(&skipPorts, "skip-ports", false, "do not check that listener ports are free")
	cmd.Flags().StringVar(&keepalived, "keepalived-config", "", "VRRP daemon configuration to check")
	cmd.Flags().StringVar(&vipRunDir, "vip-run-dir", "/run/service", "run directory of the VIP supervisor")
	cmd.Flags().StringVar(&edgeConfig, "edge-config", "", "dnsdist configuration rendered by svc edge to check")
	return cmd
}

// doctorAPI checks the server of the current context and returns the
// node's own report (nil when it could not be read) and whether that node
// runs on this host (its ports then count as held, not taken).
func (a *app) doctorAPI(cmd *cobra.Command, rep *doctor.Report) (*doctor.Report, bool) {
	c, err := a.client()
	if err != nil {
		rep.Add("api", doctor.Fail, "%v", err)
		return nil, false
	}
	ctx := cmd.Context()
	var v version.Info
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/version", out: &v, noToken: true}); err != nil {
		rep.Add("api", doctor.Fail, "%s: %v", c.Server, err)
		return nil, false
	}
	rep.Add("api", doctor.OK, "%s answers, version %s", c.Server, v.Version)
	if c.Token == "" {
		rep.Add("token", doctor.Warn, "no token: log in with `svc login`")
		return nil, false
	}
	var me api.MeBody
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/auth/me", out: &me}); err != nil {
		rep.Add("token", doctor.Fail, "%v", err)
		return nil, false
	}
	rep.Add("token", doctor.OK, "authenticated as %s %s", me.Principal.Kind, me.Principal.Name)
	var node doctor.Report
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/doctor", out: &node}); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
			rep.Add("node", doctor.Warn, "the node's own report needs settings.read: %v", err)
		} else {
			rep.Add("node", doctor.Fail, "GET /doctor: %v", err)
		}
		return nil, false
	}
	return &node, onThisHost(c.Server)
}

// opsAnswers tells whether a node answers /healthz/live on the ops
// address of this host's config (0.0.0.0 and :: are asked on loopback).
func opsAnswers(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" {
		return false
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + net.JoinHostPort(host, port) + "/healthz/live")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// onThisHost tells whether server's host is a loopback or local address.
func onThisHost(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return false
	}
	ips, err := net.LookupIP(u.Hostname())
	if err != nil || len(ips) == 0 {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, ip := range ips {
		if ip.IsLoopback() {
			return true
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}
