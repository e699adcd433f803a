package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// lookupPath finds a dotted key in a nested map.
func lookupPath(m map[string]any, key string) (any, bool) {
	var cur any = m
	for _, p := range strings.Split(key, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// setPath sets a dotted key in a nested map, creating maps on the way.
func setPath(m map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// flatten lists leaf keys of a nested map.
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		out[prefix] = v
		return
	}
	for k, x := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, x, out)
	}
}

type keyInfo struct {
	Key   string `json:"key"`
	Scope string `json:"scope"`
}

// keyScopes reads GET /settings/_schema into key -> scope.
func (a *app) keyScopes(ctx context.Context) map[string]string {
	var schema []keyInfo
	if err := a.call(ctx, request{method: http.MethodGet, path: "/settings/_schema", out: &schema}); err != nil {
		return nil
	}
	out := map[string]string{}
	for _, k := range schema {
		out[k.Key] = k.Scope
	}
	return out
}

func newSettingsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "settings", Short: "Read and change settings"}
	var scope string
	get := &cobra.Command{
		Use: "get [KEY...]", Short: "Print effective settings (all, or the given keys)",
		RunE: func(cmd *cobra.Command, args []string) error {
			var eff map[string]any
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/settings", out: &eff}); err != nil {
				return err
			}
			flat := map[string]any{}
			if len(args) == 0 {
				flatten("", eff, flat)
			} else {
				for _, k := range args {
					v, ok := lookupPath(eff, k)
					if !ok {
						all := map[string]any{}
						flatten("", eff, all)
						return fmt.Errorf("settings key %q not found%s; svc settings get lists every key", k, didYouMean(k, sortedKeys(all)))
					}
					flat[k] = v
				}
			}
			if scope != "" {
				scopes := a.keyScopes(cmd.Context())
				for k := range flat {
					if s, ok := scopes[k]; ok && s != scope {
						delete(flat, k)
					}
				}
			}
			if len(args) == 0 && scope == "" {
				if ok, err := writeData(a.stdout, a.g.Output, eff); ok {
					return err
				}
			} else if ok, err := writeData(a.stdout, a.g.Output, flat); ok {
				return err
			}
			keys := make([]string, 0, len(flat))
			for k := range flat {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				b, _ := json.Marshal(flat[k])
				fmt.Fprintf(a.stdout, "%s=%s\n", k, b)
			}
			return nil
		},
	}
	get.Flags().StringVar(&scope, "scope", "", "only keys of this scope: node or cluster")
	var setScope string
	set := &cobra.Command{
		Use:   "set KEY=VALUE... | KEY-",
		Short: "Change settings (JSON values, else strings; KEY- removes the override)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patches := map[string]map[string]any{"cluster": {}, "node": {}}
			var scopes map[string]string
			for _, arg := range args {
				var key string
				var val any
				if k, v, ok := strings.Cut(arg, "="); ok {
					key = k
					if err := json.Unmarshal([]byte(v), &val); err != nil {
						val = v
					}
				} else if strings.HasSuffix(arg, "-") {
					key, val = strings.TrimSuffix(arg, "-"), nil
				} else {
					return fmt.Errorf("%q: use KEY=VALUE or KEY-", arg)
				}
				if key == "" {
					return errors.New("empty key")
				}
				sc := setScope
				if sc == "" {
					if scopes == nil {
						scopes = a.keyScopes(cmd.Context())
					}
					sc = scopes[key]
					if sc == "" {
						sc = scopes[firstSegments(key, scopes)]
					}
					if sc == "" && len(scopes) > 0 {
						// Not a key of the schema (nor below one, as map
						// keys are): say so before the server does, with
						// the nearest keys.
						return fmt.Errorf("unknown settings key %q%s; docs/settings.md lists every key", key, didYouMean(key, sortedKeys(anyMap(scopes))))
					}
					if sc == "" {
						sc = "cluster"
					}
				}
				setPath(patches[sc], key, val)
			}
			for _, sc := range []string{"cluster", "node"} {
				p := patches[sc]
				if len(p) == 0 {
					continue
				}
				path := "/settings"
				if sc == "node" {
					path = "/node/config"
				}
				b, _ := json.Marshal(p)
				if err := a.call(cmd.Context(), request{method: http.MethodPatch, path: path, body: b, ctype: "application/merge-patch+json"}); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s settings updated: %s\n", sc, b)
			}
			return nil
		},
	}
	set.Flags().StringVar(&setScope, "scope", "", "node or cluster (default: from the settings schema)")
	cmd.AddCommand(get, set)
	return cmd
}

// firstSegments finds the longest schema key that prefixes key (map keys
// such as ratelimit.ipv4.24).
func firstSegments(key string, scopes map[string]string) string {
	parts := strings.Split(key, ".")
	for i := len(parts) - 1; i > 0; i-- {
		k := strings.Join(parts[:i], ".")
		if _, ok := scopes[k]; ok {
			return k
		}
	}
	return ""
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
