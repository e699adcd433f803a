package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/validation"
)

// Default lists of `lists allow` and `lists deny`.
const (
	defaultAllowList = api.DefaultAllowList
	defaultDenyList  = api.DefaultDenyList
)

func newListsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "lists", Short: "Block and allow lists"}
	for _, mode := range []string{"allow", "deny"} {
		mode := mode
		var list, comment string
		var regex bool
		var groups []string
		c := &cobra.Command{
			Use:   mode + " DOMAIN...",
			Short: fmt.Sprintf("Add domains to a %s list (default %s)", map[string]string{"allow": "allow", "deny": "block"}[mode], map[string]string{"allow": defaultAllowList, "deny": defaultDenyList}[mode]),
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if list == "" {
					list = defaultDenyList
					if mode == "allow" {
						list = defaultAllowList
					}
				}
				return a.addListEntries(cmd.Context(), list, mode, args, regex, groups, comment)
			},
		}
		c.Flags().StringVar(&list, "list", "", "BlockList to change")
		c.Flags().BoolVar(&regex, "regex", false, "entries are regular expressions")
		c.Flags().StringSliceVar(&groups, "group", nil, "only for the clients of this ClientGroup (namespace/name or a name in the namespace); repeatable, at most 100; default everyone the list reaches")
		c.Flags().StringVar(&comment, "comment", "", "note kept with the entries (at most 500 characters)")
		cmd.AddCommand(c)
	}
	cmd.AddCommand(newListsAddCmd(a))
	cmd.AddCommand(&cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List block and allow lists", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ki, items, err := a.listAll(cmd.Context(), "BlockList")
			if err != nil {
				return err
			}
			if a.g.Output == "" || a.g.Output == outTable || a.g.Output == outWide {
				ki, items = a.withAudience(cmd.Context(), ki, items)
			}
			return printObjects(a.stdout, a.g.Output, ki, items, true, false, time.Now())
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "refresh NAME...", Short: "Fetch lists again now", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns := a.namespace()
			for _, n := range args {
				if err := a.call(cmd.Context(), request{method: http.MethodPost, path: "/blocklists/" + url.PathEscape(ns) + "/" + url.PathEscape(n) + "/refresh"}); err != nil {
					return fmt.Errorf("blocklist/%s: %w", n, err)
				}
				fmt.Fprintf(a.stdout, "blocklist/%s refresh requested\n", n)
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "search DOMAIN", Short: "Find the inline rules and entries of lists that mention a domain", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, items, err := a.listAll(cmd.Context(), "BlockList")
			if err != nil {
				return err
			}
			domain := strings.ToLower(strings.TrimSuffix(args[0], "."))
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "LIST\tMODE\tSOURCE\tRULE")
			found := 0
			for _, it := range items {
				spec, _ := it["spec"].(map[string]any)
				mode, _ := spec["mode"].(string)
				srcs, _ := spec["sources"].([]any)
				for _, s := range srcs {
					src, _ := s.(map[string]any)
					sname, _ := src["name"].(string)
					var rules []string
					inl, _ := src["inline"].([]any)
					for _, r := range inl {
						rules = append(rules, fmt.Sprint(r))
					}
					ents, _ := src["entries"].([]any)
					for _, e := range ents {
						em, _ := e.(map[string]any)
						rules = append(rules, fmt.Sprint(em["value"]))
					}
					for _, r := range rules {
						if ruleMatches(r, domain) {
							found++
							fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", namespaceOf(it), nameOf(it), mode, sname, r)
						}
					}
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if found == 0 {
				fmt.Fprintf(a.stderr, "no inline rule or entry mentions %s (rules fetched from URLs are not searched)\n", domain)
			}
			return nil
		},
	})
	return cmd
}

// audienceKey is where withAudience puts the APPLIES-TO text of a list
// (table output only; the objects printed as JSON or YAML are unchanged).
const audienceKey = "x-appliesTo"

// withAudience adds the APPLIES-TO column (GET /blocklists/audience): to
// whom each list applies now. A server without the route shows "?".
func (a *app) withAudience(ctx context.Context, ki validation.KindInfo, items []map[string]any) (validation.KindInfo, []map[string]any) {
	var auds api.ListBody[api.ListAudience]
	err := a.call(ctx, request{method: http.MethodGet, path: "/blocklists/audience", out: &auds})
	by := map[string]string{}
	for _, x := range auds.Items {
		by[x.List] = x.AppliesTo
	}
	out := make([]map[string]any, len(items))
	for i, it := range items {
		c := make(map[string]any, len(it)+1)
		for k, v := range it {
			c[k] = v
		}
		c[audienceKey] = "?"
		if t, ok := by[namespaceOf(it)+"/"+nameOf(it)]; ok && err == nil {
			c[audienceKey] = t
		}
		out[i] = c
	}
	ki.Columns = append(append([]validation.Column(nil), ki.Columns...),
		validation.Column{Name: "APPLIES-TO", Type: "string", JSONPath: "['" + audienceKey + "']"})
	return ki, out
}

// describeAudience prints to whom a BlockList applies and which lists a
// Policy's clients get (svc describe), from the audience and policy state
// routes; nothing for other kinds or when the server cannot say.
func (a *app) describeAudience(ctx context.Context, w io.Writer, kind, ns, name string) {
	switch kind {
	case "BlockList":
		var auds api.ListBody[api.ListAudience]
		q := url.Values{"namespace": {ns}}
		if err := a.call(ctx, request{method: http.MethodGet, path: "/blocklists/audience", query: q, out: &auds}); err != nil {
			return
		}
		for _, x := range auds.Items {
			if x.List == ns+"/"+name {
				fmt.Fprintf(w, "Applies to:   %s\n", x.AppliesTo)
			}
		}
	case "Policy":
		var st api.PolicyState
		if err := a.call(ctx, request{method: http.MethodGet, path: "/policies/" + url.PathEscape(ns) + "/" + url.PathEscape(name) + "/state", out: &st}); err != nil {
			return
		}
		fmt.Fprintln(w, "Effective lists:")
		if len(st.Lists) == 0 {
			fmt.Fprintln(w, "  <none>")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  LIST\tROLE\tWHY\tAPPLIED\tNOTE")
		for _, u := range st.Lists {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%v\t%s\n", u.List, u.Role, u.Why, u.Applied, u.Note)
		}
		_ = tw.Flush()
	}
}

// ruleMatches is a loose client-side match of one rule against a domain.
func ruleMatches(rule, domain string) bool {
	r := strings.ToLower(strings.TrimSpace(rule))
	r = strings.TrimPrefix(r, "@@")
	r = strings.TrimPrefix(r, "||")
	r = strings.TrimSuffix(r, "^")
	if f := strings.Fields(r); len(f) == 2 { // hosts line
		r = f[1]
	}
	if strings.HasPrefix(r, "*.") {
		return strings.HasSuffix(domain, r[1:])
	}
	if re, err := regexp.Compile(strings.Trim(r, "/")); err == nil && strings.ContainsAny(r, `\^$[(|+?`) {
		return re.MatchString(domain)
	}
	return r == domain || strings.HasSuffix(domain, "."+r)
}

// addListEntries adds structured entries to the manual source of a list
// through POST /entries, which creates the list when missing. groups
// confines them to the clients of those ClientGroups.
func (a *app) addListEntries(ctx context.Context, list, mode string, domains []string, regex bool, groups []string, comment string) error {
	action := "block"
	if mode == "allow" {
		action = "allow"
	}
	ns := a.namespace()
	_, _, _, _, err := a.lookup(ctx, "BlockList", list)
	existed := err == nil
	if err != nil && !isNotFound(err) {
		return err
	}
	// one request per entry type: the route takes one type for its values
	byType := map[string][]string{}
	var order []string
	for _, d := range domains {
		typ, v := "exact", strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		switch {
		case regex:
			typ, v = "regex", strings.Trim(strings.TrimSpace(d), "/")
		case strings.HasPrefix(v, "*."):
			typ = "wildcard"
		}
		if v == "" {
			return fmt.Errorf("empty domain: give names such as ads.example.com, *.example.com, or --regex patterns")
		}
		if _, ok := byType[typ]; !ok {
			order = append(order, typ)
		}
		byType[typ] = append(byType[typ], v)
	}
	var page api.DomainEntries
	for _, typ := range order {
		body := api.DomainEntriesAdd{Action: action, Namespace: ns, List: list,
			DomainEntriesCreate: api.DomainEntriesCreate{Values: byType[typ], Type: typ, Comment: comment, Groups: groups}}
		if err := a.call(ctx, request{method: http.MethodPost, path: "/entries", body: body, out: &page}); err != nil {
			return fmt.Errorf("blocklist/%s: %w", list, err)
		}
	}
	if ok, err := writeData(a.stdout, a.g.Output, page); ok {
		return err
	}
	result := "created"
	if existed {
		result = "updated"
	}
	if len(groups) > 0 {
		var refs []string
		for _, g := range groups {
			if !strings.Contains(g, "/") {
				g = ns + "/" + g
			}
			refs = append(refs, g)
		}
		fmt.Fprintf(a.stdout, "blocklist/%s %s (entries for client groups %s only)\n", list, result, strings.Join(refs, ", "))
	} else {
		fmt.Fprintf(a.stdout, "blocklist/%s %s\n", list, result)
	}
	// whom the list reaches now, as apply notes say it (stderr)
	var auds api.ListBody[api.ListAudience]
	if err := a.call(ctx, request{method: http.MethodGet, path: "/blocklists/audience", query: url.Values{"namespace": {ns}}, out: &auds}); err == nil {
		for _, x := range auds.Items {
			if x.List == ns+"/"+list {
				fmt.Fprintf(a.stderr, "blocklist/%s applies to %s\n", list, x.AppliesTo)
			}
		}
	}
	return nil
}
