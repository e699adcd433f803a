package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// Catalogue is the services catalogue of this node (the node adapts
// dataplane/catalogue.Loader: Info, Current().Categories, Services, IconSVG).
type Catalogue interface {
	CatalogueInfo(ctx context.Context) (CatalogueInfo, error)
	CatalogueCategories(ctx context.Context) ([]CatalogueCategory, error)
	CatalogueServices(ctx context.Context) ([]CatalogueService, error)
	// CatalogueIconSVG returns a service's icon; onDark picks the variant
	// for dark backgrounds. false: no such service.
	CatalogueIconSVG(ctx context.Context, id string, onDark bool) ([]byte, bool)
}

// CatalogueRefresh is the state of the remote catalogue's refresh.
type CatalogueRefresh struct {
	URL         string     `json:"url"`
	LastAttempt *time.Time `json:"lastAttempt,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	LastSuccess *time.Time `json:"lastSuccess,omitempty"`
}

// CatalogueSourceInfo describes one source of the catalogue.
type CatalogueSourceInfo struct {
	ID           string            `json:"id" enum:"builtin,imported"`
	Name         string            `json:"name"`
	License      string            `json:"license"`
	Origin       string            `json:"origin"`
	Loaded       bool              `json:"loaded"`
	Services     int64             `json:"services"`
	Digest       string            `json:"digest,omitempty"`
	DroppedRules int64             `json:"droppedRules,omitempty"`
	Refresh      *CatalogueRefresh `json:"refresh,omitempty"`
	Shadowed     int64             `json:"shadowed,omitempty" doc:"imported services dropped because the builtin catalogue has the id"`
	Skipped      int64             `json:"skipped,omitempty"`
}

// CatalogueInfo describes the loaded catalogue.
type CatalogueInfo struct {
	SchemaVersion     int64                 `json:"schemaVersion"`
	Version           string                `json:"version" doc:"YYYY.MM.DD"`
	License           string                `json:"license"`
	Origin            string                `json:"origin" doc:"embedded, or the URL the catalogue came from"`
	Digest            string                `json:"digest" doc:"SHA-256 of the document"`
	Services          int64                 `json:"services"`
	Categories        int64                 `json:"categories"`
	SafeSearchEngines int64                 `json:"safeSearchEngines"`
	Sources           []CatalogueSourceInfo `json:"sources"`
	TookMS            float64               `json:"took_ms"`
	Homepage          string                `json:"homepage,omitempty"`
	Refresh           *CatalogueRefresh     `json:"refresh,omitempty"`
}

func (c *CatalogueInfo) setTook(ms float64) { c.TookMS = ms }

// CatalogueCategory is one category; field order and types equal
// dataplane/catalogue.Category so that the node can convert directly.
type CatalogueCategory struct {
	ID          string `json:"id" doc:"the id a Policy names in blockedCategories"`
	Name        string `json:"name"`
	Order       int64  `json:"order"`
	Services    int64  `json:"services"`
	Description string `json:"description,omitempty"`
	Icon        string `json:"icon,omitempty" doc:"kebab-case icon name"`
}

// CatalogueService is one service; field order and types equal
// dataplane/catalogue.Service so that the node can convert directly.
type CatalogueService struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Category   string   `json:"category"`
	List       string   `json:"list" doc:"query-log list name service:<id>"`
	Rules      int64    `json:"rules"`
	Domains    []string `json:"domains" doc:"rules as list text"`
	Source     string   `json:"source"`
	Origin     string   `json:"origin" enum:"builtin,imported"`
	License    string   `json:"license"`
	Icon       string   `json:"icon,omitempty"`
	IconOnDark string   `json:"iconOnDark,omitempty"`
	Note       string   `json:"note,omitempty"`
	Related    []string `json:"related"`
	Requires   []string `json:"requires" doc:"services blocked together with this one"`
}

type catalogueInfoOut struct{ Body *CatalogueInfo }
type categoriesOut struct {
	Body *ListBody[CatalogueCategory]
}
type servicesIn struct {
	Category string `query:"category" maxLength:"64" doc:"only services of this category"`
}
type servicesOut struct {
	Body *ListBody[CatalogueService]
}

// CatalogueIcon names where a service's icon is served.
type CatalogueIcon struct {
	ID     string `json:"id" doc:"service id"`
	Path   string `json:"path" doc:"/api/v1/catalogue/icons/{id}.svg"`
	OnDark string `json:"onDark,omitempty" doc:"path of the variant for dark backgrounds"`
}

type iconsOut struct {
	Body *ListBody[CatalogueIcon]
}

type iconIn struct {
	File    string `path:"file" maxLength:"80" doc:"service id followed by .svg"`
	Variant string `query:"variant" enum:"light,onDark" doc:"onDark: the variant for dark backgrounds"`
	Dark    bool   `query:"dark" doc:"same as variant=onDark"`
}

type iconOut struct {
	ContentType string `header:"Content-Type"`
	CSP         string `header:"Content-Security-Policy"`
	Cache       string `header:"Cache-Control"`
	Body        []byte
}

func (s *Server) catalogue() (Catalogue, error) {
	if s.deps.Catalogue == nil {
		return nil, errNotImplemented("the services catalogue")
	}
	return s.deps.Catalogue, nil
}

func (s *Server) registerCatalogueRoutes() {
	tags := []string{"catalogue"}
	register(s, huma.Operation{OperationID: "catalogue-info", Method: http.MethodGet, Path: "/catalogue", Summary: "The loaded services catalogue", Tags: tags},
		clusterPerm("info.read"), func(ctx context.Context, _ *emptyIn) (*catalogueInfoOut, error) {
			c, err := s.catalogue()
			if err != nil {
				return nil, err
			}
			in, err := c.CatalogueInfo(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			if in.Sources == nil {
				in.Sources = []CatalogueSourceInfo{}
			}
			return &catalogueInfoOut{Body: &in}, nil
		})
	register(s, huma.Operation{OperationID: "catalogue-categories", Method: http.MethodGet, Path: "/catalogue/categories", Summary: "Catalogue categories by order", Tags: tags},
		clusterPerm("info.read"), func(ctx context.Context, _ *emptyIn) (*categoriesOut, error) {
			c, err := s.catalogue()
			if err != nil {
				return nil, err
			}
			cs, err := c.CatalogueCategories(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			if cs == nil {
				cs = []CatalogueCategory{}
			}
			return &categoriesOut{Body: &ListBody[CatalogueCategory]{Items: cs}}, nil
		})
	register(s, huma.Operation{OperationID: "catalogue-services", Method: http.MethodGet, Path: "/catalogue/services", Summary: "Catalogue services by category order, then id", Tags: tags},
		clusterPerm("info.read"), func(ctx context.Context, in *servicesIn) (*servicesOut, error) {
			c, err := s.catalogue()
			if err != nil {
				return nil, err
			}
			all, err := c.CatalogueServices(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			out := []CatalogueService{}
			for _, sv := range all {
				if in.Category == "" || sv.Category == in.Category {
					out = append(out, sv)
				}
			}
			return &servicesOut{Body: &ListBody[CatalogueService]{Items: out}}, nil
		})
	register(s, huma.Operation{OperationID: "catalogue-icons", Method: http.MethodGet, Path: "/catalogue/icons", Summary: "Icons of the catalogue services, by service id", Tags: tags,
		Description: "One CatalogueIcon per service: `path` serves the icon, `onDark` the variant for dark backgrounds (both public)."},
		clusterPerm("info.read"), func(ctx context.Context, _ *emptyIn) (*iconsOut, error) {
			c, err := s.catalogue()
			if err != nil {
				return nil, err
			}
			all, err := c.CatalogueServices(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			out := make([]CatalogueIcon, 0, len(all))
			for _, sv := range all {
				if sv.Icon == "" {
					continue
				}
				out = append(out, CatalogueIcon{ID: sv.ID, Path: sv.Icon, OnDark: sv.IconOnDark})
			}
			slices.SortFunc(out, func(a, b CatalogueIcon) int { return strings.Compare(a.ID, b.ID) })
			return &iconsOut{Body: &ListBody[CatalogueIcon]{Items: out}}, nil
		})
	register(s, huma.Operation{OperationID: "catalogue-icon", Method: http.MethodGet, Path: "/catalogue/icons/{file}", Summary: "Icon of a service (image/svg+xml)", Tags: tags,
		Description: "Path `/catalogue/icons/{id}.svg`; `?variant=onDark` (or `?dark=true`) serves the variant for dark backgrounds. " +
			"Public, so that pages can show icons before login; cached by browsers for a day.",
		Errors: []int{http.StatusNotFound},
		Responses: map[string]*huma.Response{"200": {Description: "SVG icon", Content: map[string]*huma.MediaType{
			"image/svg+xml": {Schema: &huma.Schema{Type: "string"}}}}}},
		public(), func(ctx context.Context, in *iconIn) (*iconOut, error) {
			c, err := s.catalogue()
			if err != nil {
				return nil, err
			}
			id, ok := strings.CutSuffix(in.File, ".svg")
			if !ok || id == "" {
				return nil, errNotFound("icon " + in.File)
			}
			b, ok := c.CatalogueIconSVG(ctx, id, in.Dark || in.Variant == "onDark")
			if !ok {
				return nil, errNotFound("icon " + in.File)
			}
			return &iconOut{ContentType: "image/svg+xml", CSP: "default-src 'none'; style-src 'unsafe-inline'",
				Cache: "public, max-age=86400", Body: b}, nil
		})
}
