package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/svcdns/svc/internal/api"
)

// A backup is one multi-document YAML file: a Settings document with the
// cluster settings set through the API, every object (with its manager
// when it is not the API), and the local users (password hashes only with
// --include-secrets). `svc restore` puts it back on the node it came from
// (everything unchanged) or on a fresh node. See docs/cli.md.

// Kinds of backup documents that are not objects of /apply.
const (
	backupSettingsKind = "Settings"
	backupUserKind     = "LocalUser"
	backupAPIVersion   = "service.io/v1alpha1"
)

type backupOptions struct {
	out                                  string
	excludeManaged, safe, includeSecrets bool
}

func (a *app) runBackup(ctx context.Context, o backupOptions) error {
	if o.out == "" {
		return errors.New("--out is required (a file, or - for standard output)")
	}
	kinds, err := a.servedKinds(true)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var docs []map[string]any
	var bs api.BackupSettings
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/backup/settings", out: &bs}); err != nil {
		return fmt.Errorf("backup of settings: %w", err)
	}
	if len(bs.Values) > 0 {
		vals := any(bs.Values)
		if o.safe {
			vals = redactURLs(vals)
		}
		docs = append(docs, map[string]any{"apiVersion": backupAPIVersion, "kind": backupSettingsKind,
			"metadata": map[string]any{"name": "cluster"}, "values": vals})
	}
	objects := 0
	for _, ki := range kinds {
		items, err := listObjects(ctx, c, ki, "", "")
		if err != nil {
			if ki.Internal {
				fmt.Fprintf(a.stderr, "warning: %s skipped: %v\n", ki.Plural, err)
				continue
			}
			return fmt.Errorf("listing %s: %w", ki.Plural, err)
		}
		for _, it := range items {
			mgr := managerOf(it)
			if o.excludeManaged && mgr != "api" {
				continue
			}
			obj := cleanForApply(it)
			if mgr != "api" {
				// restore needs to know: such an object comes back from its
				// source on the node it came from, from the backup elsewhere
				md, _ := obj["metadata"].(map[string]any)
				ann, _ := md["annotations"].(map[string]any)
				if ann == nil {
					ann = map[string]any{}
				}
				ann[managerAnnotation] = mgr
				md["annotations"] = ann
			}
			if o.safe {
				obj = redactURLs(obj).(map[string]any)
			}
			docs = append(docs, obj)
			objects++
		}
	}
	var users api.ListBody[api.BackupUser]
	q := url.Values{}
	if o.includeSecrets {
		q.Set("secrets", "true")
	}
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/backup/users", query: q, out: &users}); err != nil {
		if o.includeSecrets {
			return fmt.Errorf("backup of users with --include-secrets: %w", err)
		}
		fmt.Fprintf(a.stderr, "warning: local users skipped: %v\n", err)
	}
	for _, u := range users.Items {
		spec, err := toMap(u)
		if err != nil {
			return err
		}
		docs = append(docs, map[string]any{"apiVersion": backupAPIVersion, "kind": backupUserKind,
			"metadata": map[string]any{"name": u.Username}, "spec": spec})
	}
	secrets := "without secrets (users restore without passwords)"
	if o.includeSecrets {
		secrets = "WITH password hashes: keep this file as safe as the node"
	}
	header := fmt.Sprintf("# svc backup of %s at %s: %d settings, %d objects, %d users, %s\n# restore with: svc restore -f FILE\n",
		c.Server, time.Now().UTC().Format(time.RFC3339), len(bs.Values), objects, len(users.Items), secrets)
	var buf bytes.Buffer
	if err := writeManifests(&buf, outYAML, docs, header); err != nil {
		return err
	}
	if o.out == "-" {
		_, err = a.stdout.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(o.out, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(a.stderr, "wrote %d settings, %d objects and %d users to %s\n", len(bs.Values), objects, len(users.Items), o.out)
	return nil
}

func toMap(v any) (map[string]any, error) {
	var m map[string]any
	if err := jsonRoundTrip(v, &m); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return m, nil
}

// runRestore applies a backup: settings through PATCH /settings, objects
// through POST /apply (those another manager owns on this node are left
// to it), users through POST /backup/users.
func (a *app) runRestore(ctx context.Context, file string) error {
	docs, err := a.readManifests([]string{file}, false)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var settingsDocs, users, objs []map[string]any
	for _, d := range docs {
		switch d["kind"] {
		case backupSettingsKind:
			settingsDocs = append(settingsDocs, d)
		case backupUserKind:
			users = append(users, d)
		default:
			objs = append(objs, d)
		}
	}
	if err := a.restoreSettings(ctx, c, settingsDocs); err != nil {
		return err
	}
	if err := a.restoreObjects(ctx, c, objs, file); err != nil {
		return err
	}
	return a.restoreUsers(ctx, c, users)
}

func (a *app) restoreSettings(ctx context.Context, c *Client, docs []map[string]any) error {
	want := map[string]any{}
	for _, d := range docs {
		vals, _ := d["values"].(map[string]any)
		for k, v := range vals {
			want[k] = v
		}
	}
	if len(want) == 0 {
		return nil
	}
	var cur api.BackupSettings
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/backup/settings", out: &cur}); err != nil {
		return fmt.Errorf("restore settings: %w", err)
	}
	patch := map[string]any{}
	var keys []string
	for k, v := range want {
		if hasRedacted(v) {
			fmt.Fprintf(a.stderr, "warning: setting %s skipped: the backup was written with --safe (credentials redacted)\n", k)
			continue
		}
		if !sameJSON(cur.Values[k], v) {
			patch[k] = v
			keys = append(keys, k)
		}
	}
	if len(patch) == 0 {
		fmt.Fprintln(a.stdout, "settings/cluster unchanged")
		return nil
	}
	sort.Strings(keys)
	if err := c.Do(ctx, request{method: http.MethodPatch, path: "/settings", body: patch, ctype: "application/merge-patch+json"}); err != nil {
		return fmt.Errorf("restore settings (%s): %w", strings.Join(keys, ", "), err)
	}
	fmt.Fprintf(a.stdout, "settings/cluster updated (%s)\n", strings.Join(keys, ", "))
	return nil
}

// sameJSON compares values as JSON would (numbers from YAML and JSON differ
// in Go type only).
func sameJSON(x, y any) bool {
	var a, b any
	if jsonRoundTrip(x, &a) != nil || jsonRoundTrip(y, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

func (a *app) restoreObjects(ctx context.Context, c *Client, objs []map[string]any, file string) error {
	// What already exists here, and who manages it: an object a file or
	// the bootstrap manages on this node comes back from there.
	owners := map[string]map[string]string{} // kind -> "ns/name" -> manager
	var apply []map[string]any
	var skipped []string
	for _, o := range objs {
		kind, _ := o["kind"].(string)
		md, _ := o["metadata"].(map[string]any)
		ns, _ := md["namespace"].(string)
		name, _ := md["name"].(string)
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, managerAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
		if _, ok := owners[kind]; !ok {
			owners[kind] = map[string]string{}
			ki, err := a.resolveKind(kind)
			if err != nil {
				return err
			}
			items, err := listObjects(ctx, c, ki, "", "")
			if err != nil {
				return fmt.Errorf("listing %s: %w", ki.Plural, err)
			}
			for _, it := range items {
				imd, _ := it["metadata"].(map[string]any)
				ins, _ := imd["namespace"].(string)
				iname, _ := imd["name"].(string)
				owners[kind][ins+"/"+iname] = managerOf(it)
			}
		}
		if hasRedacted(o) {
			fmt.Fprintf(a.stderr, "warning: %s/%s holds credentials redacted by backup --safe: set them again after the restore\n", strings.ToLower(kind), name)
		}
		if mgr, ok := owners[kind][ns+"/"+name]; ok && mgr != "api" {
			skipped = append(skipped, fmt.Sprintf("%s/%s unchanged (managed by %s on this node)", strings.ToLower(kind), name, mgr))
			continue
		}
		apply = append(apply, o)
	}
	if len(apply) == 0 {
		for _, s := range skipped {
			fmt.Fprintln(a.stdout, s)
		}
		return nil
	}
	res, err := a.applyObjects(ctx, apply)
	var ae *APIError
	if errors.As(err, &ae) && ae.Key == "managed_by" {
		return fmt.Errorf("%w\nhint: objects managed by files or bootstrap come back from their source, not from a backup: "+
			"write the backup with svc backup --exclude-managed (or remove them from %s) and restore again", err, file)
	}
	if err != nil {
		return err
	}
	for _, s := range skipped {
		fmt.Fprintln(a.stdout, s)
	}
	return a.printApplyResults(res)
}

func (a *app) restoreUsers(ctx context.Context, c *Client, docs []map[string]any) error {
	if len(docs) == 0 {
		return nil
	}
	var body struct {
		Items []api.BackupUser `json:"items"`
	}
	for _, d := range docs {
		var u api.BackupUser
		if err := jsonRoundTrip(d["spec"], &u); err != nil {
			return fmt.Errorf("LocalUser %v: %w", d["metadata"], err)
		}
		body.Items = append(body.Items, u)
	}
	var res api.ListBody[api.UserRestoreResult]
	if err := c.Do(ctx, request{method: http.MethodPost, path: "/backup/users", body: body, out: &res}); err != nil {
		return fmt.Errorf("restore users: %w", err)
	}
	var need []string
	for _, r := range res.Items {
		fmt.Fprintf(a.stdout, "localuser/%s %s\n", r.Username, r.Result)
		if r.NeedsPassword {
			need = append(need, r.Username)
		}
	}
	if len(need) > 0 {
		fmt.Fprintf(a.stderr, "note: %s restored without a password (the backup holds no password hashes).\n"+
			"Set one on the node with: svc admin reset-password NAME (it prints a one-time password the user changes at first login),\n"+
			"or back up with --include-secrets to keep passwords.\n", strings.Join(need, ", "))
	}
	return nil
}

// jsonRoundTrip converts v into out through JSON.
func jsonRoundTrip(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// hasRedacted reports whether v holds a URL credential that backup --safe
// replaced (redactURL writes REDACTED).
func hasRedacted(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			if hasRedacted(x) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if hasRedacted(x) {
				return true
			}
		}
	case string:
		return strings.Contains(t, "://") && strings.Contains(t, "REDACTED")
	}
	return false
}
