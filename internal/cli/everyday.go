package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

// Everyday verbs over objects: a list from a URL, catalogue services and
// safe search per policy. Each reads the object, changes one field and
// applies it back, so the server's validation and ownership rules apply
// as for `svc apply`.

// localListURLHint is the fix of the list fetcher's refusal of loopback,
// link-local and multicast URLs; the key is host-only and read at start.
const localListURLHint = "the node refuses list URLs on loopback, link-local, unspecified and multicast addresses; " +
	"to allow them set blocking.allowLocalListURLs: true in the node's configuration file " +
	"(or SERVICE_BLOCKING__ALLOWLOCALLISTURLS=true) and restart it; private LAN addresses are always allowed"

func newListsAddCmd(a *app) *cobra.Command {
	var src, mode, format, refresh string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "add NAME --url URL",
		Short: "Add a block (or allow) list fetched from a URL, and show the fetch result",
		Long: "Creates BlockList NAME with one URL source, or adds the URL as a source of an existing list, then waits " +
			"(--wait) until the node fetched it and prints the entries it loaded or the fetch error. Exits non-zero when " +
			"the fetch failed; the list stays and is fetched again at its refresh interval (svc lists refresh NAME).",
		Example: "  svc lists add ads --url https://example.org/hosts.txt\n" +
			"  svc lists add trusted --url https://example.org/allow.txt --mode allow --format domains",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if src == "" {
				return errors.New("--url is required: the address of the list (hosts, adblock or one domain per line)")
			}
			u, err := url.Parse(src)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("--url %q: an http:// or https:// URL such as https://example.org/hosts.txt", src)
			}
			if !slices.Contains([]string{"block", "allow"}, mode) {
				return fmt.Errorf("--mode %q: block or allow%s", mode, didYouMean(mode, []string{"block", "allow"}))
			}
			if refresh != "" {
				if _, err := parseDuration("--refresh-interval", refresh); err != nil {
					return err
				}
			}
			return a.addListURL(cmd.Context(), args[0], src, mode, format, refresh, wait)
		},
	}
	f := cmd.Flags()
	f.StringVar(&src, "url", "", "address of the list (http or https)")
	f.StringVar(&mode, "mode", "block", "block or allow (for a new list)")
	f.StringVar(&format, "format", "", "list format (default: detected)")
	f.StringVar(&refresh, "refresh-interval", "", "how often the list is fetched again, e.g. 24h (default: the list default)")
	f.DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the first fetch (0: do not wait)")
	return cmd
}

// sourceName derives a source name from a URL: host plus last path element.
func sourceName(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "url"
	}
	n := p.Host
	if base := strings.TrimSuffix(p.Path[strings.LastIndex(p.Path, "/")+1:], ".txt"); base != "" {
		n += "-" + base
	}
	var b strings.Builder
	for _, r := range strings.ToLower(n) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-.")
	if len(s) > 60 {
		s = s[:60]
	}
	if s == "" {
		return "url"
	}
	return s
}

func (a *app) addListURL(ctx context.Context, name, src, mode, format, refresh string, wait time.Duration) error {
	c, ki, ns, obj, err := a.lookup(ctx, "BlockList", name)
	if isNotFound(err) {
		spec := map[string]any{"mode": mode, "sources": []any{}}
		if refresh != "" {
			spec["refreshInterval"] = refresh
		}
		obj = map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "BlockList",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}
	} else if err != nil {
		return err
	}
	spec, _ := obj["spec"].(map[string]any)
	srcs, _ := spec["sources"].([]any)
	sname := sourceName(src)
	for _, s := range srcs {
		m, _ := s.(map[string]any)
		if m["url"] == src {
			return fmt.Errorf("blocklist/%s already has source %v with %s; svc lists refresh %s fetches it again", name, m["name"], src, name)
		}
		if m["name"] == sname {
			sname += fmt.Sprintf("-%d", len(srcs)+1)
		}
	}
	s := map[string]any{"name": sname, "url": src}
	if format != "" {
		s["format"] = format
	}
	spec["sources"] = append(srcs, s)
	delete(obj, "status")
	before := ""
	if st := sourceStatus(obj, sname); st != nil {
		before = fmt.Sprint(st["lastFetched"])
	}
	res, err := a.applyObjects(ctx, []map[string]any{obj})
	if err != nil {
		return err
	}
	if err := a.printApplyResults(res); err != nil {
		return err
	}
	if wait <= 0 {
		fmt.Fprintf(a.stdout, "source %s added; see the fetch result with svc describe blocklist %s\n", sname, name)
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		cur, err := getObject(ctx, c, ki, ns, name)
		if err != nil {
			return err
		}
		if st := sourceStatus(cur, sname); st != nil && (st["error"] != nil || (st["lastFetched"] != nil && fmt.Sprint(st["lastFetched"]) != before)) {
			return a.printFetchResult(name, sname, src, st)
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(a.stderr, "no fetch result for %s within %s; it shows in svc describe blocklist %s\n", src, wait, name)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sourceStatus is status.sources[name] of a BlockList, or nil.
func sourceStatus(obj map[string]any, name string) map[string]any {
	st, _ := obj["status"].(map[string]any)
	srcs, _ := st["sources"].([]any)
	for _, s := range srcs {
		if m, ok := s.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	return nil
}

func (a *app) printFetchResult(list, sname, src string, st map[string]any) error {
	if e, ok := st["error"].(string); ok && e != "" {
		msg := fmt.Sprintf("blocklist/%s: fetching %s failed: %s", list, src, e)
		if strings.Contains(e, "refused address") || strings.Contains(e, "loopback") {
			msg += "\nhint: " + localListURLHint
		}
		return errors.New(msg)
	}
	num := func(k string) int64 { f, _ := st[k].(float64); return int64(f) }
	fmt.Fprintf(a.stdout, "source %s: %s entries from %s", sname, thousands(num("entries")), src)
	if n := num("invalid"); n > 0 {
		fmt.Fprintf(a.stdout, " (%s lines not understood)", thousands(n))
	}
	fmt.Fprintln(a.stdout)
	return nil
}

// catalogue reads GET /catalogue/services.
func (a *app) catalogue(ctx context.Context) ([]api.CatalogueService, error) {
	var page api.ListBody[api.CatalogueService]
	if err := a.call(ctx, request{method: http.MethodGet, path: "/catalogue/services", out: &page}); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// policy reads one Policy, and on 404 lists the policies there are.
func (a *app) policy(ctx context.Context, name string) (map[string]any, error) {
	if name == "" {
		return nil, a.policyChoice(ctx, "--policy is required: the policy of the clients to change")
	}
	ki, err := a.resolveKind("Policy")
	if err != nil {
		return nil, err
	}
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	obj, err := getObject(ctx, c, ki, a.namespace(), name)
	if isNotFound(err) {
		return nil, a.policyChoice(ctx, fmt.Sprintf("policy %q not found in namespace %s", name, a.namespace()), name)
	}
	return obj, err
}

// policyChoice is msg plus the policies there are and a did-you-mean.
func (a *app) policyChoice(ctx context.Context, msg string, typed ...string) error {
	ki, err := a.resolveKind("Policy")
	if err != nil {
		return errors.New(msg)
	}
	c, err := a.client()
	if err != nil {
		return errors.New(msg)
	}
	items, err := listObjects(ctx, c, ki, a.namespace(), "")
	if err != nil {
		return errors.New(msg)
	}
	var names []string
	for _, it := range items {
		names = append(names, nameOf(it))
	}
	if len(typed) == 1 {
		msg += didYouMean(typed[0], names)
	}
	if len(names) == 0 {
		return errors.New(msg + "; there is no Policy in this namespace: create one with svc apply -f (docs/policies.md)")
	}
	return errors.New(msg + "; policies: " + strings.Join(names, ", "))
}

func (a *app) applyPolicy(ctx context.Context, obj map[string]any) error {
	delete(obj, "status")
	res, err := a.applyObjects(ctx, []map[string]any{obj})
	if err != nil {
		return err
	}
	return a.printApplyResults(res)
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func anyList(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

// serviceState says whether a policy blocks a service and why.
func serviceState(spec map[string]any, sv api.CatalogueService) string {
	switch {
	case slices.Contains(stringList(spec["allowedServices"]), sv.ID):
		return "allowed"
	case slices.Contains(stringList(spec["blockedServices"]), sv.ID):
		return "blocked"
	case slices.Contains(stringList(spec["blockedCategories"]), sv.Category):
		return "blocked (category " + sv.Category + ")"
	}
	return "-"
}

func newServicesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "services",
		Aliases: []string{"service", "svcs"},
		Short:   "Catalogue services (apps and sites) and blocking them per policy",
		Long: "The catalogue names the domains of well-known services (video, social, games...). A Policy blocks services " +
			"for the clients of its client groups: spec.blockedServices, spec.blockedCategories, and spec.allowedServices " +
			"for exceptions (docs/catalogue.md, docs/policies.md).",
	}
	var policy, category string
	ls := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List catalogue services; with --policy, whether that policy blocks each", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svcs, err := a.catalogue(cmd.Context())
			if err != nil {
				return err
			}
			var spec map[string]any
			if policy != "" {
				obj, err := a.policy(cmd.Context(), policy)
				if err != nil {
					return err
				}
				spec, _ = obj["spec"].(map[string]any)
			}
			var rows []api.CatalogueService
			var cats []string
			for _, sv := range svcs {
				cats = append(cats, sv.Category)
				if category == "" || sv.Category == category {
					rows = append(rows, sv)
				}
			}
			if category != "" && len(rows) == 0 {
				return fmt.Errorf("--category %q: no such category%s", category, didYouMean(category, cats))
			}
			if ok, err := writeData(a.stdout, a.g.Output, rows); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			head := "ID\tNAME\tCATEGORY\tRULES"
			if spec != nil {
				head += "\tIN " + strings.ToUpper(policy)
			}
			fmt.Fprintln(tw, head)
			for _, sv := range rows {
				line := fmt.Sprintf("%s\t%s\t%s\t%d", sv.ID, sv.Name, sv.Category, sv.Rules)
				if spec != nil {
					line += "\t" + serviceState(spec, sv)
				}
				fmt.Fprintln(tw, line)
			}
			return tw.Flush()
		},
	}
	ls.Flags().StringVar(&policy, "policy", "", "show whether this Policy blocks each service")
	ls.Flags().StringVar(&category, "category", "", "only services of this category")
	cmd.AddCommand(ls, newServiceToggleCmd(a, true), newServiceToggleCmd(a, false))
	return cmd
}

// newServiceToggleCmd is `services block` (block=true) or `services unblock`.
func newServiceToggleCmd(a *app, block bool) *cobra.Command {
	var policy string
	verb, short := "unblock", "Stop blocking catalogue services for the clients of a policy"
	if block {
		verb, short = "block", "Block catalogue services for the clients of a policy"
	}
	cmd := &cobra.Command{
		Use:     verb + " SERVICE-ID... --policy POLICY",
		Short:   short,
		Example: fmt.Sprintf("  svc services %s youtube tiktok --policy kids", verb),
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			svcs, err := a.catalogue(ctx)
			if err != nil {
				return err
			}
			byID := map[string]api.CatalogueService{}
			var ids []string
			for _, sv := range svcs {
				byID[sv.ID] = sv
				ids = append(ids, sv.ID, sv.Name)
			}
			for _, id := range args {
				if _, ok := byID[id]; !ok {
					return fmt.Errorf("service %q is not in the catalogue%s; svc services list shows the ids", id, didYouMean(id, ids))
				}
			}
			obj, err := a.policy(ctx, policy)
			if err != nil {
				return err
			}
			spec, _ := obj["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
				obj["spec"] = spec
			}
			blocked, allowed := stringList(spec["blockedServices"]), stringList(spec["allowedServices"])
			cats := stringList(spec["blockedCategories"])
			var notes []string
			for _, id := range args {
				if block {
					allowed = slices.DeleteFunc(allowed, func(s string) bool { return s == id })
					if !slices.Contains(blocked, id) && !slices.Contains(cats, byID[id].Category) {
						blocked = append(blocked, id)
					}
					continue
				}
				blocked = slices.DeleteFunc(blocked, func(s string) bool { return s == id })
				if slices.Contains(cats, byID[id].Category) && !slices.Contains(allowed, id) {
					// Still blocked through its category: an exception.
					allowed = append(allowed, id)
					notes = append(notes, fmt.Sprintf("%s stays out of blocked category %s as an exception (spec.allowedServices)", id, byID[id].Category))
				}
			}
			sort.Strings(blocked)
			sort.Strings(allowed)
			setOrDelete(spec, "blockedServices", blocked)
			setOrDelete(spec, "allowedServices", allowed)
			if err := a.applyPolicy(ctx, obj); err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintln(a.stdout, n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&policy, "policy", "", "Policy whose clients are affected (required)")
	return cmd
}

func setOrDelete(spec map[string]any, key string, v []string) {
	if len(v) == 0 {
		delete(spec, key)
		return
	}
	spec[key] = anyList(v)
}

func newSafeSearchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "safesearch",
		Aliases: []string{"safe-search"},
		Short:   "Safe search per policy: search engines and video sites answer with their safe variant",
	}
	var policy, mode string
	set := func(on bool) *cobra.Command {
		verb := "disable"
		if on {
			verb = "enable"
		}
		c := &cobra.Command{
			Use:  verb + " --policy POLICY",
			Args: cobra.NoArgs,
			Short: map[bool]string{true: "Turn safe search on for the clients of a policy",
				false: "Turn safe search off for the clients of a policy"}[on],
			RunE: func(cmd *cobra.Command, _ []string) error {
				if on && !slices.Contains([]string{"strict", "moderate"}, mode) {
					return fmt.Errorf("--mode %q: strict or moderate%s", mode, didYouMean(mode, []string{"strict", "moderate"}))
				}
				obj, err := a.policy(cmd.Context(), policy)
				if err != nil {
					return err
				}
				spec, _ := obj["spec"].(map[string]any)
				if spec == nil {
					spec = map[string]any{}
					obj["spec"] = spec
				}
				if on {
					spec["safeSearch"] = true
					spec["safeSearchMode"] = mode
				} else {
					delete(spec, "safeSearch")
				}
				return a.applyPolicy(cmd.Context(), obj)
			},
		}
		c.Flags().StringVar(&policy, "policy", "", "Policy whose clients are affected (required)")
		if on {
			c.Flags().StringVar(&mode, "mode", "strict", "strict or moderate (moderate differs only on the video site)")
		}
		return c
	}
	status := &cobra.Command{
		Use: "status", Short: "Safe search of every policy", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ki, err := a.resolveKind("Policy")
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			items, err := listObjects(cmd.Context(), c, ki, a.namespace(), "")
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "POLICY\tSAFE SEARCH\tMODE\tGROUPS")
			for _, it := range items {
				spec, _ := it["spec"].(map[string]any)
				on, _ := spec["safeSearch"].(bool)
				m, _ := spec["safeSearchMode"].(string)
				if !on {
					m = "-"
				} else if m == "" {
					m = "strict"
				}
				groups := strings.Join(stringList(spec["clientGroupRefs"]), ",")
				if groups == "" {
					groups = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", nameOf(it), map[bool]string{true: "on", false: "off"}[on], m, groups)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(set(true), set(false), status)
	return cmd
}
