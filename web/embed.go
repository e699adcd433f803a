// Package web holds the dashboard's files (static/), embedded into the
// binary; internal/dashboard serves them. There is no build step: the files
// are the ES modules the browser loads (see docs/dashboard.md).
package web

import "embed"

// Static is the dashboard: index.html, the ES modules, the style sheet and
// the vendored Preact + htm build.
//
//go:embed static
var Static embed.FS
