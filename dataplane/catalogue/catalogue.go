// Package catalogue holds the catalogue of blockable services (social
// networks, video sites, games, ...) that policies name in blockedServices,
// blockedCategories and allowedServices. An embedded document is always
// available; a document from blocking.catalogue.url replaces it and an
// opt-in third-party services file adds services. Every Catalogue is
// immutable; the Loader swaps whole catalogues.
package catalogue

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/svcdns/svc/dataplane/blocklist"
)

//go:embed builtin.json
var builtinJSON []byte

// Origins and source ids of the spec.
const (
	OriginEmbedded = "embedded"
	SourceBuiltin  = "builtin"
	SourceImported = "imported"
	// ListPrefix prefixes a service id in query-log list names.
	ListPrefix = "service:"
	// IconPathPrefix is where the API serves icons.
	IconPathPrefix = "/api/v1/catalogue/icons/"
)

// Info is the CatalogueInfo shape (took_ms is set by the API).
type Info struct {
	SchemaVersion     int64        `json:"schemaVersion"`
	Version           string       `json:"version"`
	License           string       `json:"license"`
	Origin            string       `json:"origin"`
	Digest            string       `json:"digest"`
	Services          int64        `json:"services"`
	Categories        int64        `json:"categories"`
	SafeSearchEngines int64        `json:"safeSearchEngines"`
	Sources           []SourceInfo `json:"sources"`
	TookMS            float64      `json:"took_ms"`
	Homepage          string       `json:"homepage,omitempty"`
	Refresh           *Refresh     `json:"refresh,omitempty"`
}

// Refresh is the CatalogueRefresh shape.
type Refresh struct {
	URL         string     `json:"url"`
	LastAttempt *time.Time `json:"lastAttempt,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	LastSuccess *time.Time `json:"lastSuccess,omitempty"`
}

// SourceInfo is the CatalogueSourceInfo shape.
type SourceInfo struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	License  string `json:"license"`
	Origin   string `json:"origin"`
	Loaded   bool   `json:"loaded"`
	Services int64  `json:"services"`
	Digest   string `json:"digest,omitempty"`
	// DroppedRules counts rules that were invalid or unsupported.
	DroppedRules int64    `json:"droppedRules,omitempty"`
	Refresh      *Refresh `json:"refresh,omitempty"`
	// Shadowed counts imported services dropped because the builtin catalogue
	// has the id.
	Shadowed int64 `json:"shadowed,omitempty"`
	// Skipped counts imported services dropped for other reasons (bad id, no
	// usable rule).
	Skipped int64 `json:"skipped,omitempty"`
}

// Category is the CatalogueCategory shape.
type Category struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Order       int64  `json:"order"`
	Services    int64  `json:"services"`
	Description string `json:"description,omitempty"`
	Icon        string `json:"icon,omitempty"`
}

// Service is the CatalogueService shape.
type Service struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Category   string   `json:"category"`
	List       string   `json:"list"`
	Rules      int64    `json:"rules"`
	Domains    []string `json:"domains"`
	Source     string   `json:"source"`
	Origin     string   `json:"origin"`
	License    string   `json:"license"`
	Icon       string   `json:"icon,omitempty"`
	IconOnDark string   `json:"iconOnDark,omitempty"`
	Note       string   `json:"note,omitempty"`
	Related    []string `json:"related"`
	Requires   []string `json:"requires"`
}

// Icon is the CatalogueIcon shape.
type Icon struct {
	ID     string `json:"id"`
	Path   string `json:"path"`
	OnDark string `json:"onDark,omitempty"`
}

type entry struct {
	svc          Service
	src          *blocklist.Source // compiled rules, source name "service:<id>"
	light, dark  []byte
	categoryRank int
}

// Catalogue is one immutable catalogue.
type Catalogue struct {
	info       Info
	categories []Category
	entries    []entry // sorted by category order, then id
	byID       map[string]int
	byCategory map[string][]string
}

// Input builds a catalogue.
type Input struct {
	// Document is the main document; nil means the embedded one.
	Document []byte
	// Origin is OriginEmbedded or the URL the document came from.
	Origin string
	// Imported is an optional third-party services file and its URL.
	Imported       []byte
	ImportedOrigin string
	// SafeSearchEngines is reported in Info.
	SafeSearchEngines int
}

// Builtin returns the embedded catalogue.
func Builtin(ctx context.Context, safeSearchEngines int) (*Catalogue, error) {
	return Build(ctx, Input{SafeSearchEngines: safeSearchEngines})
}

// Build parses and compiles a catalogue. An invalid main document is an
// error; an invalid imported file only marks the imported source not loaded.
func Build(ctx context.Context, in Input) (*Catalogue, error) {
	raw := in.Document
	if raw == nil {
		raw, in.Origin = builtinJSON, OriginEmbedded
	}
	doc, err := ParseDocument(raw)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])
	c := &Catalogue{byID: map[string]int{}, byCategory: map[string][]string{}}
	c.info = Info{SchemaVersion: 2, Version: doc.Version, License: doc.License, Origin: in.Origin,
		Digest: digest, Homepage: doc.Homepage, SafeSearchEngines: int64(in.SafeSearchEngines)}
	rank := map[string]int{}
	colors := map[string]string{}
	cats := append([]DocCategory(nil), doc.Categories...)
	sort.SliceStable(cats, func(i, j int) bool { return cats[i].Order < cats[j].Order })
	for i, dc := range cats {
		rank[dc.ID], colors[dc.ID] = i, dc.Color
		c.categories = append(c.categories, Category{ID: dc.ID, Name: dc.Name, Order: dc.Order, Description: dc.Description, Icon: dc.Icon})
	}
	builtin := SourceInfo{ID: SourceBuiltin, Name: "Built-in catalogue", License: doc.License, Origin: in.Origin, Loaded: true, Digest: digest}
	for _, ds := range doc.Services {
		e, dropped, err := compileService(ctx, ds, SourceBuiltin, in.Origin, doc.License, colors[ds.Category])
		if err != nil {
			return nil, err
		}
		builtin.DroppedRules += dropped
		e.categoryRank = rank[ds.Category]
		c.add(e)
	}
	builtin.Services = int64(len(c.entries))
	c.info.Sources = append(c.info.Sources, builtin)
	if in.Imported != nil {
		c.info.Sources = append(c.info.Sources, c.addImported(ctx, in.Imported, in.ImportedOrigin, rank, colors))
	}
	sort.SliceStable(c.entries, func(i, j int) bool {
		a, b := c.entries[i], c.entries[j]
		if a.categoryRank != b.categoryRank {
			return a.categoryRank < b.categoryRank
		}
		return a.svc.ID < b.svc.ID
	})
	for i, e := range c.entries {
		c.byID[e.svc.ID] = i
		c.byCategory[e.svc.Category] = append(c.byCategory[e.svc.Category], e.svc.ID)
	}
	for i := range c.categories {
		c.categories[i].Services = int64(len(c.byCategory[c.categories[i].ID]))
	}
	c.info.Services, c.info.Categories = int64(len(c.entries)), int64(len(c.categories))
	return c, nil
}

func (c *Catalogue) add(e entry) {
	c.byID[e.svc.ID] = len(c.entries)
	c.entries = append(c.entries, e)
}

func (c *Catalogue) addImported(ctx context.Context, raw []byte, origin string, rank map[string]int, colors map[string]string) SourceInfo {
	sum := sha256.Sum256(raw)
	si := SourceInfo{ID: SourceImported, Name: "Imported services", License: "as published by the source", Origin: origin, Digest: hex.EncodeToString(sum[:])}
	im, err := ParseImported(raw)
	if err != nil {
		return si
	}
	si.Loaded = true
	other := false
	for _, is := range im.BlockedServices {
		if _, ok := c.byID[is.ID]; ok {
			si.Shadowed++
			continue
		}
		if !idPattern.MatchString(is.ID) || is.Name == "" {
			si.Skipped++
			continue
		}
		cat, ok := importedGroups[is.Group]
		if _, known := rank[cat]; !ok || !known {
			cat, other = "other", true
		}
		ds := DocService{ID: is.ID, Name: is.Name, Category: cat, Rules: is.Rules}
		if safeSVG(is.IconSVG) {
			ds.IconSVG = is.IconSVG
		}
		e, dropped, err := compileService(ctx, ds, SourceImported, origin, si.License, colors[cat])
		si.DroppedRules += dropped
		if err != nil || e.svc.Rules == 0 {
			si.Skipped++
			continue
		}
		e.categoryRank = rank[cat]
		c.add(e)
		si.Services++
	}
	if other {
		if _, ok := rank["other"]; !ok {
			rank["other"] = len(c.categories)
			c.categories = append(c.categories, Category{ID: "other", Name: "Other", Order: 1000})
		}
		for i := range c.entries {
			if c.entries[i].svc.Category == "other" {
				c.entries[i].categoryRank = rank["other"]
			}
		}
	}
	return si
}

func compileService(ctx context.Context, ds DocService, source, origin, license, color string) (entry, int64, error) {
	src, err := blocklist.CompileSource(ctx, blocklist.SourceSpec{Name: ListPrefix + ds.ID, Format: blocklist.FormatAdblock},
		strings.NewReader(strings.Join(ds.Rules, "\n")))
	if err != nil {
		return entry{}, 0, fmt.Errorf("service %s: %w", ds.ID, err)
	}
	st := src.Status()
	svc := Service{ID: ds.ID, Name: ds.Name, Category: ds.Category, List: ListPrefix + ds.ID,
		Rules: int64(st.Entries), Domains: append([]string{}, ds.Rules...), Source: source, Origin: originKind(source),
		License: license, Icon: IconPathPrefix + ds.ID + ".svg", IconOnDark: IconPathPrefix + ds.ID + ".svg?variant=onDark",
		Note: ds.Note, Related: ds.Related, Requires: ds.Requires}
	_ = origin
	e := entry{svc: svc, src: src}
	e.light, e.dark = []byte(ds.IconSVG), []byte(ds.IconSVGOnDark)
	if ds.IconSVG == "" || !safeSVG(ds.IconSVG) {
		e.light = generatedIcon(ds.Name, color, false)
	}
	if ds.IconSVGOnDark == "" || !safeSVG(ds.IconSVGOnDark) {
		if ds.IconSVG != "" && safeSVG(ds.IconSVG) {
			e.dark = e.light
		} else {
			e.dark = generatedIcon(ds.Name, color, true)
		}
	}
	return e, int64(st.Invalid + st.Unsupported), nil
}

func originKind(source string) string {
	if source == SourceImported {
		return "imported"
	}
	return "builtin"
}

// Info returns the CatalogueInfo of this catalogue (without refresh state).
func (c *Catalogue) Info() Info {
	in := c.info
	in.Sources = append([]SourceInfo(nil), c.info.Sources...)
	return in
}

// Categories lists the categories by order.
func (c *Catalogue) Categories() []Category { return append([]Category(nil), c.categories...) }

// Services lists the services by category order, then id.
func (c *Catalogue) Services() []Service {
	out := make([]Service, len(c.entries))
	for i, e := range c.entries {
		out[i] = e.svc
	}
	return out
}

// Service returns one service.
func (c *Catalogue) Service(id string) (Service, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Service{}, false
	}
	return c.entries[i].svc, true
}

// HasService reports whether id is a service of the catalogue.
func (c *Catalogue) HasService(id string) bool { _, ok := c.byID[id]; return ok }

// HasCategory reports whether id is a category of the catalogue.
func (c *Catalogue) HasCategory(id string) bool {
	for _, cat := range c.categories {
		if cat.ID == id {
			return true
		}
	}
	return false
}

// CategoryServices lists the service ids of a category.
func (c *Catalogue) CategoryServices(id string) []string { return c.byCategory[id] }

// Source returns the compiled rules of a service; its source name is the
// query-log list name "service:<id>".
func (c *Catalogue) Source(id string) *blocklist.Source {
	i, ok := c.byID[id]
	if !ok {
		return nil
	}
	return c.entries[i].src
}

// Icon returns the icon description of a service.
func (c *Catalogue) Icon(id string) (Icon, bool) {
	if _, ok := c.byID[id]; !ok {
		return Icon{}, false
	}
	p := IconPathPrefix + id + ".svg"
	return Icon{ID: id, Path: p, OnDark: p + "?variant=onDark"}, true
}

// IconSVG returns the SVG bytes of a service icon, for a dark background when
// onDark. Serve with Content-Type image/svg+xml and a Content-Security-Policy
// of "default-src 'none'; style-src 'unsafe-inline'" (imported icons are
// third-party markup).
func (c *Catalogue) IconSVG(id string, onDark bool) ([]byte, bool) {
	i, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	if onDark {
		return c.entries[i].dark, true
	}
	return c.entries[i].light, true
}
