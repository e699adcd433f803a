package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/validation"
)

// objectPath is the /objects route of one object.
func objectPath(ki validation.KindInfo, ns, name string) string {
	if ki.Namespaced {
		return "/objects/" + ki.Plural + "/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	}
	return "/objects/" + ki.Plural + "/" + url.PathEscape(name)
}

// listObjects pages through a kind's list route. ns "" lists every namespace.
// listAll resolves kind and lists its objects in every namespace.
func (a *app) listAll(ctx context.Context, kind string) (validation.KindInfo, []map[string]any, error) {
	ki, err := a.resolveKind(kind)
	if err != nil {
		return ki, nil, err
	}
	c, err := a.client()
	if err != nil {
		return ki, nil, err
	}
	items, err := listObjects(ctx, c, ki, "", "")
	return ki, items, err
}

func listObjects(ctx context.Context, c *Client, ki validation.KindInfo, ns, selector string) ([]map[string]any, error) {
	var out []map[string]any
	cont := ""
	for {
		q := url.Values{}
		if ki.Namespaced && ns != "" {
			q.Set("namespace", ns)
		}
		if selector != "" {
			q.Set("labelSelector", selector)
		}
		if cont != "" {
			q.Set("continue", cont)
		}
		var page api.ListBody[map[string]any]
		if err := c.Do(ctx, request{method: http.MethodGet, path: "/objects/" + ki.Plural, query: q, out: &page}); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			break
		}
		cont = page.Continue
	}
	sortObjects(out)
	return out, nil
}

// lookup resolves kind, the client and the namespace, then reads name in
// it: err is getObject's (isNotFound for a missing object) or why the
// lookup could not be made.
func (a *app) lookup(ctx context.Context, kind, name string) (c *Client, ki validation.KindInfo, ns string, obj map[string]any, err error) {
	if ki, err = a.resolveKind(kind); err != nil {
		return nil, ki, "", nil, err
	}
	if c, err = a.client(); err != nil {
		return nil, ki, "", nil, err
	}
	ns = a.namespace()
	obj, err = getObject(ctx, c, ki, ns, name)
	return c, ki, ns, obj, err
}

func getObject(ctx context.Context, c *Client, ki validation.KindInfo, ns, name string) (map[string]any, error) {
	var obj map[string]any
	if err := c.Do(ctx, request{method: http.MethodGet, path: objectPath(ki, ns, name), out: &obj}); err != nil {
		return nil, err
	}
	return obj, nil
}

func isNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// servedKinds are the kinds export and backup walk: every CRD kind, plus the
// internal kinds the API serves under /objects when withInternal is set.
func (a *app) servedKinds(withInternal bool) ([]validation.KindInfo, error) {
	v, err := a.kindRegistry()
	if err != nil {
		return nil, err
	}
	exposed := map[string]bool{"RoleBinding": true, "ServiceAccount": true, "IdentityProvider": true}
	var out []validation.KindInfo
	for _, k := range v.Kinds() {
		if !k.Internal || (withInternal && exposed[k.Kind]) {
			out = append(out, k)
		}
	}
	return out, nil
}

// cleanForApply removes server-set fields so an object re-applies verbatim.
func cleanForApply(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	md, _ := obj["metadata"].(map[string]any)
	nmd := map[string]any{}
	for k, v := range md {
		switch k {
		case "resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp":
			continue
		case "annotations":
			ann, _ := v.(map[string]any)
			na := map[string]any{}
			for ak, av := range ann {
				if ak != managerAnnotation {
					na[ak] = av
				}
			}
			if len(na) > 0 {
				nmd[k] = na
			}
			continue
		}
		nmd[k] = v
	}
	out["metadata"] = nmd
	return out
}

const managerAnnotation = "service.io/managed-by"

// managerOf is the object's manager; api when unset.
func managerOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if m, _ := ann[managerAnnotation].(string); m != "" {
		return m
	}
	return "api"
}

// redactURLs replaces credentials in every URL string of v.
func redactURLs(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = redactURLs(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = redactURLs(x)
		}
		return out
	case string:
		return redactURL(t)
	}
	return v
}

var secretParams = []string{"token", "key", "secret", "password", "pass", "auth", "apikey", "api_key", "access_token", "sig", "signature"}

func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	changed := false
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
		} else {
			u.User = url.User("REDACTED")
		}
		changed = true
	}
	q := u.Query()
	for k := range q {
		for _, p := range secretParams {
			if strings.EqualFold(k, p) {
				q.Set(k, "REDACTED")
				changed = true
			}
		}
	}
	if !changed {
		return s
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// exportObjects collects cleaned objects of kinds.
func (a *app) exportObjects(ctx context.Context, c *Client, kinds []validation.KindInfo, ns string, excludeManaged, safe, tolerate bool) ([]map[string]any, error) {
	var out []map[string]any
	for _, ki := range kinds {
		items, err := listObjects(ctx, c, ki, ns, "")
		if err != nil {
			if tolerate && ki.Internal {
				fmt.Fprintf(a.stderr, "warning: %s skipped: %v\n", ki.Plural, err)
				continue
			}
			return nil, fmt.Errorf("listing %s: %w", ki.Plural, err)
		}
		for _, it := range items {
			if excludeManaged && managerOf(it) != "api" {
				continue
			}
			o := cleanForApply(it)
			if safe {
				o = redactURLs(o).(map[string]any)
			}
			out = append(out, o)
		}
	}
	return out, nil
}
