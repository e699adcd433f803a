package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

func newGetCmd(a *app) *cobra.Command {
	var allNS bool
	var selector string
	cmd := &cobra.Command{
		Use:   "get KIND [NAME...]",
		Short: "List or show objects (columns from the kind's printer columns)",
		Long: "Lists objects with the columns of their kind. When an object is not Ready (or is Degraded), a REASON column " +
			"follows READY with that condition's reason (ZoneNotFound, InvalidRecords, UnknownList, ...); -o wide adds its MESSAGE. " +
			"svc describe shows every condition in full.",
		Example:           "  svc get zones\n  svc get rrset -A -o wide\n  svc get bl ads -o yaml",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeKindThenNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(a.g.Output); err != nil {
				return err
			}
			ki, err := a.resolveKind(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ns := a.namespace()
			var items []map[string]any
			if len(args) > 1 {
				for _, name := range args[1:] {
					obj, err := getObject(ctx, c, ki, ns, name)
					if err != nil {
						return fmt.Errorf("%s %q: %w", strings.ToLower(ki.Kind), name, err)
					}
					items = append(items, obj)
				}
			} else {
				if allNS {
					ns = ""
				}
				if items, err = listObjects(ctx, c, ki, ns, selector); err != nil {
					return err
				}
				if len(items) == 0 && (a.g.Output == outTable || a.g.Output == outWide) {
					where := " in namespace " + ns
					if !ki.Namespaced || allNS {
						where = ""
					}
					fmt.Fprintf(a.stderr, "No %s found%s.\n", ki.Plural, where)
					return nil
				}
			}
			if items == nil {
				items = []map[string]any{}
			}
			return printObjects(a.stdout, a.g.Output, ki, items, allNS, len(args) == 2, time.Now())
		},
	}
	cmd.Flags().BoolVarP(&allNS, "all-namespaces", "A", false, "list objects of every namespace")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	return cmd
}

func newDescribeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "describe KIND NAME",
		Short:             "Show an object's spec, status conditions and diagnoses",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: a.completeKindThenNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			ki, err := a.resolveKind(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ns := a.namespace()
			obj, err := getObject(ctx, c, ki, ns, args[1])
			if err != nil {
				return err
			}
			w := a.stdout
			md, _ := obj["metadata"].(map[string]any)
			fmt.Fprintf(w, "Name:         %s\n", nameOf(obj))
			if ki.Namespaced {
				fmt.Fprintf(w, "Namespace:    %s\n", namespaceOf(obj))
			}
			fmt.Fprintf(w, "Kind:         %s\n", ki.Kind)
			fmt.Fprintf(w, "Managed by:   %s\n", managerOf(obj))
			for _, f := range []struct{ key, title string }{{"labels", "Labels"}, {"annotations", "Annotations"}} {
				m, _ := md[f.key].(map[string]any)
				fmt.Fprintf(w, "%-13s ", f.title+":")
				if len(m) == 0 {
					fmt.Fprintln(w, "<none>")
					continue
				}
				first := true
				for _, k := range sortedKeys(m) {
					if !first {
						fmt.Fprint(w, "              ")
					}
					first = false
					fmt.Fprintf(w, "%s=%v\n", k, m[k])
				}
			}
			if ts, _ := md["creationTimestamp"].(string); ts != "" {
				fmt.Fprintf(w, "Created:      %s\n", ts)
			}
			if rv, _ := md["resourceVersion"].(string); rv != "" {
				fmt.Fprintf(w, "Version:      %s\n", rv)
			}
			if spec, ok := obj["spec"]; ok {
				fmt.Fprintln(w, "Spec:")
				fmt.Fprintln(w, indent(toYAMLString(spec), "  "))
			}
			a.describeAudience(ctx, w, ki.Kind, ns, args[1])
			st, _ := obj["status"].(map[string]any)
			fmt.Fprintln(w, "Conditions:")
			conds, _ := st["conditions"].([]any)
			if len(conds) == 0 {
				fmt.Fprintln(w, "  <none>")
			} else {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
				for _, x := range conds {
					cm, _ := x.(map[string]any)
					age := ""
					if t, err := time.Parse(time.RFC3339, fmt.Sprint(cm["lastTransitionTime"])); err == nil {
						age = humanAge(time.Since(t))
					}
					fmt.Fprintf(tw, "  %v\t%v\t%v\t%s\t%v\n", cm["type"], cm["status"], cm["reason"], age, cm["message"])
				}
				_ = tw.Flush()
			}
			if rest := statusWithoutConditions(st); len(rest) > 0 {
				fmt.Fprintln(w, "Status:")
				fmt.Fprintln(w, indent(toYAMLString(rest), "  "))
			}
			fmt.Fprintln(w, "Diagnoses:")
			var msgs api.ListBody[api.DiagnosisMessage]
			err = c.Do(ctx, request{method: http.MethodGet, path: "/info/messages", out: &msgs})
			n := 0
			if err == nil {
				for _, m := range msgs.Items {
					if mentions(m.Object, ki.Kind, ns, args[1]) {
						n++
						fmt.Fprintf(w, "  %s  %s: %s\n", m.Severity, m.Reason, m.Message)
					}
				}
			}
			if n == 0 {
				fmt.Fprintln(w, "  <none>")
			}
			return nil
		},
	}
}

func statusWithoutConditions(st map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range st {
		if k != "conditions" {
			out[k] = v
		}
	}
	return out
}

// mentions reports whether a diagnosis names the object (kind/ns/name,
// ns/name or name forms).
func mentions(obj, kind, ns, name string) bool {
	if obj == "" {
		return false
	}
	o := strings.ToLower(obj)
	for _, f := range []string{name, ns + "/" + name, strings.ToLower(kind) + "/" + name, strings.ToLower(kind) + "/" + ns + "/" + name} {
		if o == strings.ToLower(f) {
			return true
		}
	}
	return false
}

func indent(s, pre string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = pre + l
	}
	return strings.Join(lines, "\n")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return keys
}

// completeKindThenNames completes kind names, then object names.
func (a *app) completeKindThenNames(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		kinds, err := a.servedKinds(false)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, k := range kinds {
			out = append(out, k.Plural)
			out = append(out, k.ShortNames...)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	ki, err := a.resolveKind(args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	c, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	items, err := listObjects(cmd.Context(), c, ki, a.namespace(), "")
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for _, it := range items {
		out = append(out, nameOf(it))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// queryValues builds a query from pairs, skipping empty values.
func queryValues(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}
