package kube

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/config/crd"
)

// kindInfo describes how one kind is kept in the cluster.
type kindInfo struct {
	Kind       string
	GVR        schema.GroupVersionResource
	Namespaced bool
	// Status is true when the CRD has a status subresource.
	Status bool
	// Internal kinds are kept as Secrets in the service namespace.
	Internal bool
}

// loadKinds reads the embedded CRDs: bases are installed custom resources,
// internal ones are kept in Secrets.
func loadKinds() (map[string]*kindInfo, error) {
	out := map[string]*kindInfo{}
	for _, src := range []struct {
		fsys     fs.FS
		dir      string
		internal bool
	}{{crd.Bases, "bases", false}, {crd.Internal, "internal", true}} {
		files, err := fs.Glob(src.fsys, path.Join(src.dir, "*.yaml"))
		if err != nil {
			return nil, fmt.Errorf("list embedded CRDs: %w", err)
		}
		for _, f := range files {
			data, err := fs.ReadFile(src.fsys, f)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", f, err)
			}
			var c apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(data, &c); err != nil {
				return nil, fmt.Errorf("parse %s: %w", f, err)
			}
			var version string
			status := false
			for _, v := range c.Spec.Versions {
				if v.Storage {
					version = v.Name
					status = v.Subresources != nil && v.Subresources.Status != nil
				}
			}
			out[c.Spec.Names.Kind] = &kindInfo{
				Kind:       c.Spec.Names.Kind,
				GVR:        schema.GroupVersionResource{Group: c.Spec.Group, Version: version, Resource: c.Spec.Names.Plural},
				Namespaced: c.Spec.Scope == apiextensionsv1.NamespaceScoped,
				Status:     status,
				Internal:   src.internal,
			}
		}
	}
	return out, nil
}

// CRDKinds lists the kinds installed as custom resources (sorted by the
// embedded file names), for RBAC checks and tests.
func CRDKinds() ([]string, error) {
	kinds, err := loadKinds()
	if err != nil {
		return nil, err
	}
	var out []string
	for k, ki := range kinds {
		if !ki.Internal {
			out = append(out, k)
		}
	}
	return out, nil
}

func lower(s string) string { return strings.ToLower(s) }
