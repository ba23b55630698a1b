package caddymodule

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// cursorPagination is the cursor pagination object of list responses.
type cursorPagination struct {
	PageSize int    `json:"page_size"`
	Next     string `json:"next,omitempty"`
}

// cursorPage is a cursor-paginated list response.
type cursorPage[T any] struct {
	Pagination cursorPagination `json:"pagination"`
	Data       []T              `json:"data"`
}

// encodeCursor makes the opaque cursor of a position in a listing.
func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset)))
}

// decodeCursor reads a cursor from encodeCursor; "" is the start.
func decodeCursor(start string) (int, error) {
	if start == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(start)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(raw), "o:"); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	return 0, errField("start", "start must be the pagination.next of a previous page")
}

// cursorParams reads start (an opaque cursor) and size (1 to 100, default
// 20) from the query.
func cursorParams(c *call) (start string, size int, err error) {
	q := c.r.URL.Query()
	size = defaultPageSize
	if v := q.Get("size"); v != "" {
		if size, err = strconv.Atoi(v); err != nil || size < 1 || size > maxPageSize {
			return "", 0, errField("size", "size must be a whole number from 1 to 100")
		}
	}
	return q.Get("start"), size, nil
}

// listLogs: GET /logs, the tenant's audit records newest first, filtered
// by entity_type, entity_id, start_date and end_date, cursor-paginated.
func listLogs(c *call) error {
	start, size, err := cursorParams(c)
	if err != nil {
		return err
	}
	q := c.r.URL.Query()
	f := vaultstore.AuditFilter{EntityType: q.Get("entity_type"), EntityID: q.Get("entity_id")}
	if f.EntityType != "" && !slices.ContainsFunc(logEntityTypes, func(t entityType) bool { return t.Value == f.EntityType }) {
		return errField("entity_type", "entity_type must be one of "+entityTypeValues()+" (GET /logs/entity-types)")
	}
	for _, d := range []struct {
		name string
		to   *time.Time
	}{{"start_date", &f.Since}, {"end_date", &f.Until}} {
		if v := q.Get(d.name); v != "" {
			if *d.to, err = vaultstore.ParseDateTime(d.name, v); err != nil {
				return err
			}
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return errField("end_date", "end_date must not be before start_date")
	}
	// clients that page with page=N (the Node SDK does) get the same
	// pages: the cursor of page N is found by walking the ones before
	if p := q.Get("page"); p != "" && start == "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return errField("page", "page must be a whole number of at least 1")
		}
		for i := 1; i < n; i++ {
			if _, start, err = c.store.ListAudit(c.ctx(), c.tenantID(), f, start, size); err != nil {
				return err
			}
			if start == "" {
				return writeJSON(c.w, http.StatusOK, cursorPage[*vaultstore.AuditRecord]{
					Pagination: cursorPagination{PageSize: size}, Data: []*vaultstore.AuditRecord{}})
			}
		}
	}
	records, next, err := c.store.ListAudit(c.ctx(), c.tenantID(), f, start, size)
	if err != nil {
		return err
	}
	if records == nil {
		records = []*vaultstore.AuditRecord{}
	}
	return writeJSON(c.w, http.StatusOK, cursorPage[*vaultstore.AuditRecord]{
		Pagination: cursorPagination{PageSize: size, Next: next},
		Data:       records,
	})
}

// entityType is one kind of entity audit records name.
type entityType struct {
	DisplayName string `json:"display_name"`
	Value       string `json:"value"`
}

// logEntityTypes are the kinds of entity audit records name, the values
// of GET /logs?entity_type=.
var logEntityTypes = []entityType{
	{"Application", "application"},
	{"API Key", "key"},
	{"Client Encryption Key", "client-key"},
	{"Document", "document"},
	{"Hostname", "hostname"},
	{"Proxy", "proxy"},
	{"Reactor", "reactor"},
	{"Session", "session"},
	{"Tenant", "tenant"},
	{"Token", "token"},
	{"Token Intent", "token-intent"},
	{"Webhook", "webhook"},
}

// entityTypeValues lists the values of logEntityTypes: "application, key, ...".
func entityTypeValues() string {
	values := make([]string, len(logEntityTypes))
	for i, t := range logEntityTypes {
		values[i] = t.Value
	}
	return strings.Join(values, ", ")
}

// listLogEntityTypes: GET /logs/entity-types.
func listLogEntityTypes(c *call) error {
	return writeJSON(c.w, http.StatusOK, logEntityTypes)
}
