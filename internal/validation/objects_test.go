package validation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Test fixtures: a valid base object per kind, edited by path.

// samples reads config/samples, one valid object per CRD kind, keyed by kind.
func samples(t testing.TB) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		m := u.Object
		k := u.GetKind()
		if _, dup := out[k]; dup {
			t.Fatalf("two samples of kind %s", k)
		}
		out[k] = m
	}
	return out
}

// internalBases are valid objects of the internal kinds.
const internalBases = `
LocalUser:
  apiVersion: service.io/v1alpha1
  kind: LocalUser
  metadata: {name: alice}
  spec:
    username: alice
    displayName: Alice
    passwordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo"
    groups: [ops]
    sessionsValidAfter: "2024-05-01T10:00:00Z"
APIToken:
  apiVersion: service.io/v1alpha1
  kind: APIToken
  metadata: {name: abcdef012345}
  spec:
    id: abcdef012345
    hash: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    owner: {kind: User, name: alice, id: "42"}
    description: laptop
    scopes: [viewer, "zone-admin@zone:example.com"]
    createdAt: "2024-05-01T10:00:00Z"
    expiresAt: "2024-06-01T10:00:00Z"
ServiceAccount:
  apiVersion: service.io/v1alpha1
  kind: ServiceAccount
  metadata: {name: ci, namespace: service-system}
  spec: {description: deploys zones}
RoleBinding:
  apiVersion: service.io/v1alpha1
  kind: RoleBinding
  metadata: {name: ops-operators}
  spec:
    subject: {kind: Group, name: ops}
    role: operator
IdentityProvider:
  apiVersion: service.io/v1alpha1
  kind: IdentityProvider
  metadata: {name: corp}
  spec:
    id: corp
    displayName: Corp SSO
    issuerURL: https://login.example.com
    clientID: service
    clientSecretFile: /run/secrets/oidc
`

func bases(t testing.TB) map[string]map[string]any {
	t.Helper()
	out := samples(t)
	var internal map[string]any
	if err := yaml.Unmarshal([]byte(internalBases), &internal); err != nil {
		t.Fatal(err)
	}
	for k, v := range jsonValue(internal).(map[string]any) {
		out[k] = v.(map[string]any)
	}
	return out
}

// edit changes an object at a path such as "spec.sources[0].name"; del removes.
type edit struct {
	path string
	val  any
	del  bool
}

func set(path string, val any) edit { return edit{path: path, val: jsonValue(val)} }

// jsonValue turns a Go value into what a JSON decoder makes of it (int64, float64,
// []any, map[string]any), which unstructured objects require.
func jsonValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}
func del(path string) edit { return edit{path: path, del: true} }

// pathParts splits "a.b[2].c" into "a", "b", 2, "c".
func pathParts(p string) []any {
	var out []any
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if err != nil {
				panic(fmt.Sprintf("bad path %q", p))
			}
			out = append(out, i)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

func apply(obj map[string]any, e edit) {
	parts := pathParts(e.path)
	var cur any = obj
	for i, p := range parts {
		last := i == len(parts)-1
		switch key := p.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				if e.del {
					delete(m, key)
				} else {
					m[key] = e.val
				}
				return
			}
			if _, ok := m[key]; !ok {
				if _, nextIsIndex := parts[i+1].(int); nextIsIndex {
					m[key] = []any{}
				} else {
					m[key] = map[string]any{}
				}
			}
			cur = m[key]
		case int:
			s := cur.([]any)
			if last {
				if e.del {
					panic("cannot delete list items")
				}
				s[key] = e.val
				return
			}
			cur = s[key]
		}
	}
}

func build(base map[string]any, edits []edit) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: base}
	u = u.DeepCopy()
	for _, e := range edits {
		apply(u.Object, e)
	}
	return u
}

// strs returns n distinct strings.
func strs(n int, prefix string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// objs returns n copies of an object.
func objs(n int, o map[string]any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = (&unstructured.Unstructured{Object: o}).DeepCopy().Object
	}
	return out
}
