package catalogue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Document is a catalogue document, schema version 2 (the embedded one and
// blocking.catalogue.url). Version 1 documents decode into the same type:
// they have no categories block (categories are taken from the services) and
// list plain domains instead of rules.
type Document struct {
	SchemaVersion int           `json:"schemaVersion"`
	Version       string        `json:"version"`
	License       string        `json:"license"`
	Homepage      string        `json:"homepage,omitempty"`
	Categories    []DocCategory `json:"categories,omitempty"`
	Services      []DocService  `json:"services"`
}

// DocCategory is one category of a document.
type DocCategory struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Order       int64  `json:"order"`
	Description string `json:"description,omitempty"`
	Icon        string `json:"icon,omitempty"`
	// Color is the "#rrggbb" colour of generated service icons.
	Color string `json:"color,omitempty"`
}

// DocService is one service of a document.
type DocService struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Category string `json:"category"`
	// Rules are adblock rules (schema 2).
	Rules []string `json:"rules,omitempty"`
	// Domains are plain names (schema 1); each becomes ||name^.
	Domains  []string `json:"domains,omitempty"`
	Note     string   `json:"note,omitempty"`
	Related  []string `json:"related,omitempty"`
	Requires []string `json:"requires,omitempty"`
	// IconSVG and IconSVGOnDark replace the generated icons.
	IconSVG       string `json:"iconSVG,omitempty"`
	IconSVGOnDark string `json:"iconSVGOnDark,omitempty"`
}

// Limits on outside documents.
const (
	MaxDocumentBytes = 8 << 20
	maxServices      = 5000
	maxRulesPer      = 5000
	maxIconBytes     = 64 << 10
)

var (
	idPattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	versionPattern = regexp.MustCompile(`^[0-9]{4}\.(0[1-9]|1[0-2])\.(0[1-9]|[12][0-9]|3[01])$`)
	// ErrInvalid wraps every reason a document is refused.
	ErrInvalid = errors.New("invalid catalogue document")
)

// ParseDocument decodes and checks a catalogue document (schema 2 or 1).
// Version 1 documents are converted to version 2 form.
func ParseDocument(b []byte) (*Document, error) {
	if len(b) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, MaxDocumentBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var d Document
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch d.SchemaVersion {
	case 2:
	case 1:
		upgradeV1(&d)
	default:
		return nil, fmt.Errorf("%w: schemaVersion %d (want 2 or 1)", ErrInvalid, d.SchemaVersion)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &d, nil
}

func upgradeV1(d *Document) {
	seen := map[string]bool{}
	for _, c := range d.Categories {
		seen[c.ID] = true
	}
	for i := range d.Services {
		s := &d.Services[i]
		for _, dom := range s.Domains {
			s.Rules = append(s.Rules, "||"+strings.TrimSuffix(dom, ".")+"^")
		}
		s.Domains = nil
		if s.Category != "" && !seen[s.Category] {
			seen[s.Category] = true
			d.Categories = append(d.Categories, DocCategory{ID: s.Category, Name: s.Category, Order: int64(len(d.Categories) + 1)})
		}
	}
	d.SchemaVersion = 2
}

func (d *Document) check() error {
	if !versionPattern.MatchString(d.Version) {
		return fmt.Errorf("version %q is not YYYY.MM.DD", d.Version)
	}
	if d.License == "" {
		return errors.New("license is required")
	}
	if len(d.Services) == 0 || len(d.Services) > maxServices {
		return fmt.Errorf("%d services (want 1 to %d)", len(d.Services), maxServices)
	}
	cats := map[string]bool{}
	for i, c := range d.Categories {
		if !idPattern.MatchString(c.ID) {
			return fmt.Errorf("categories[%d]: bad id %q", i, c.ID)
		}
		if cats[c.ID] {
			return fmt.Errorf("categories[%d]: duplicate id %q", i, c.ID)
		}
		if c.Name == "" {
			return fmt.Errorf("categories[%d]: name is required", i)
		}
		cats[c.ID] = true
	}
	ids := map[string]bool{}
	for i, s := range d.Services {
		if !idPattern.MatchString(s.ID) {
			return fmt.Errorf("services[%d]: bad id %q", i, s.ID)
		}
		if ids[s.ID] {
			return fmt.Errorf("services[%d]: duplicate id %q", i, s.ID)
		}
		ids[s.ID] = true
		if s.Name == "" {
			return fmt.Errorf("services[%d] %s: name is required", i, s.ID)
		}
		if !cats[s.Category] {
			return fmt.Errorf("services[%d] %s: unknown category %q", i, s.ID, s.Category)
		}
		if len(s.Rules) == 0 || len(s.Rules) > maxRulesPer {
			return fmt.Errorf("services[%d] %s: %d rules (want 1 to %d)", i, s.ID, len(s.Rules), maxRulesPer)
		}
	}
	return nil
}

// Imported is the shape of a third-party services file (AdGuard's
// HostlistsRegistry services.json).
type Imported struct {
	BlockedServices []ImportedService `json:"blocked_services"`
}

// ImportedService is one service of an imported file.
type ImportedService struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Rules   []string `json:"rules"`
	IconSVG string   `json:"icon_svg"`
	Group   string   `json:"group"`
}

// ParseImported decodes a third-party services file.
func ParseImported(b []byte) (*Imported, error) {
	if len(b) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, MaxDocumentBytes)
	}
	var im Imported
	if err := json.Unmarshal(b, &im); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(im.BlockedServices) == 0 || len(im.BlockedServices) > maxServices {
		return nil, fmt.Errorf("%w: %d blocked_services (want 1 to %d)", ErrInvalid, len(im.BlockedServices), maxServices)
	}
	return &im, nil
}

// importedGroups maps AdGuard's group names to our category ids.
var importedGroups = map[string]string{
	"social_network": "social", "streaming": "video", "gaming": "gaming",
	"messenger": "messaging", "shop": "shopping", "dating": "dating",
	"gambling": "gambling", "ai": "ai", "music": "music", "news": "news",
	"adult": "adult", "privacy": "other", "hosting": "other", "cdn": "other",
	"software": "other",
}

// safeSVG reports whether an outside icon may be served from our origin: no
// scripts, event handlers, external references or foreign objects.
func safeSVG(s string) bool {
	if s == "" || len(s) > maxIconBytes {
		return false
	}
	l := strings.ToLower(s)
	if !strings.Contains(l, "<svg") {
		return false
	}
	for _, bad := range []string{"<script", "javascript:", "<foreignobject", "<iframe", "<!entity", "xlink:href=\"http", "href=\"http", "data:text"} {
		if strings.Contains(l, bad) {
			return false
		}
	}
	return !onAttr.MatchString(l)
}

var onAttr = regexp.MustCompile(`\son[a-z]+\s*=`)
