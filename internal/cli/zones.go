package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

func zonePath(zone, sub string) string { return "/zones/" + url.PathEscape(zone) + sub }

func newZonesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "zones", Aliases: []string{"zone"}, Short: "Manage DNS zones"}
	list := &cobra.Command{
		Use: "list", Short: "List zones", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ki, items, err := a.listAll(cmd.Context(), "DNSZone")
			if err != nil {
				return err
			}
			return printObjects(a.stdout, a.g.Output, ki, items, false, false, time.Now())
		},
	}
	get := &cobra.Command{
		Use: "get ZONE", Short: "Show one zone", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ki, err := a.resolveKind("DNSZone")
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			obj, err := getObject(cmd.Context(), c, ki, "", args[0])
			if err != nil {
				return err
			}
			return printObjects(a.stdout, a.g.Output, ki, []map[string]any{obj}, false, true, time.Now())
		},
	}
	var dryRun bool
	del := &cobra.Command{
		Use: "delete ZONE", Short: "Delete a zone and every record set that references it", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res api.ZoneDeleteResult
			q := url.Values{}
			if dryRun {
				q.Set("dryRun", "true")
			}
			if err := a.call(cmd.Context(), request{method: http.MethodDelete, path: zonePath(args[0], ""), query: q, out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			if dryRun {
				fmt.Fprintf(a.stdout, "dnszone/%s would be deleted with %d record sets (%d records)\n", args[0], res.RecordSets, res.Records)
				return nil
			}
			fmt.Fprintf(a.stdout, "dnszone/%s deleted with %d record sets (%d records)\n", args[0], res.RecordSets, res.Records)
			return nil
		},
	}
	del.Flags().BoolVar(&dryRun, "dry-run", false, "only count what would be deleted")
	var out string
	export := &cobra.Command{
		Use: "export ZONE", Short: "Print the zone as a BIND zone file", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body []byte
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: zonePath(args[0], "/export"), header: http.Header{"Accept": {"text/dns"}}, out: &body}); err != nil {
				return err
			}
			if out != "" && out != "-" {
				if err := os.WriteFile(out, body, 0o644); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				fmt.Fprintf(a.stderr, "wrote %s\n", out)
				return nil
			}
			_, err := a.stdout.Write(body)
			return err
		},
	}
	export.Flags().StringVar(&out, "out", "", "write to this file instead of standard output")
	imp := newZoneImportCmd(a, "import ZONE -f FILE", "Import a BIND zone file into one record set of the zone", false)
	notify := &cobra.Command{
		Use: "notify ZONE", Short: "Send NOTIFY to the zone's secondaries", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res map[string]any
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: zonePath(args[0], "/notify"), out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			fmt.Fprintf(a.stdout, "dnszone/%s notified\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, get, del, export, imp, notify)
	return cmd
}

// newZoneImportCmd is `zones import` and `import bind`.
func newZoneImportCmd(a *app, use, short string, withOrigin bool) *cobra.Command {
	var file, recordSet, origin string
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return errors.New("-f is required")
			}
			var data []byte
			var err error
			if file == "-" {
				var buf bytes.Buffer
				_, err = buf.ReadFrom(a.stdin)
				data = buf.Bytes()
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("-f: %w", err)
			}
			if withOrigin && origin != "" {
				if err := a.ensureZone(cmd.Context(), args[0], origin); err != nil {
					return err
				}
			}
			var res api.ApplyResult
			q := queryValues("recordSet", recordSet, "namespace", a.namespace())
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: zonePath(args[0], "/import"), query: q, body: data, ctype: "text/dns", out: &res}); err != nil {
				if withOrigin && origin == "" && isNotFound(err) {
					return fmt.Errorf("%w\nhint: DNSZone %s does not exist; pass --origin with the zone's DNS name (e.g. --origin %s.) to create it, or create it first with svc apply", err, args[0], args[0])
				}
				return err
			}
			return a.printApplyResults([]api.ApplyResult{res})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "zone file (- for standard input)")
	cmd.Flags().StringVar(&recordSet, "record-set", "", "DNSRecordSet to write (default import-<zone>)")
	if withOrigin {
		cmd.Flags().StringVar(&origin, "origin", "", "zone name; creates the DNSZone when it is missing")
	}
	return cmd
}

// ensureZone creates a DNSZone named zone for origin unless it exists.
func (a *app) ensureZone(ctx context.Context, zone, origin string) error {
	ki, err := a.resolveKind("DNSZone")
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if _, err := getObject(ctx, c, ki, "", zone); err == nil {
		return nil
	} else if !isNotFound(err) {
		return err
	}
	obj := map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone",
		"metadata": map[string]any{"name": zone}, "spec": map[string]any{"zoneName": origin}}
	res, err := a.applyObjects(ctx, []map[string]any{obj})
	if err != nil {
		return fmt.Errorf("creating zone %s: %w", zone, err)
	}
	return a.printApplyResults(res)
}

func newImportCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "import", Short: "Import data from other formats"}
	cmd.AddCommand(newZoneImportCmd(a, "bind ZONE -f FILE", "Import a BIND zone file (--origin creates the zone if missing)", true))
	return cmd
}
