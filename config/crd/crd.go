// Package crd embeds the generated CRD manifests: bases (installed in a
// cluster) and internal (CRD-shaped schemas of the internal kinds, never
// installed, used for in-process validation only).
package crd

import "embed"

// Bases holds bases/*.yaml, one CustomResourceDefinition per installable kind.
//
//go:embed bases/*.yaml
var Bases embed.FS

// Internal holds internal/*.yaml, CRD-shaped schemas of the internal kinds.
//
//go:embed internal/*.yaml
var Internal embed.FS
