package vaultstore

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Application types.
const (
	AppPrivate    = "private"
	AppPublic     = "public"
	AppManagement = "management"
)

// Transforms an access rule applies to token data returned to a caller.
const (
	TransformReveal = "reveal"
	TransformMask   = "mask"
	TransformRedact = "redact"
)

// permissionsByType lists what each application type may be granted.
var permissionsByType = map[string][]string{
	AppPublic: {"token:create", "token:update", "token-intent:create"},
	AppPrivate: {
		"token:create", "token:read", "token:update", "token:delete", "token:use", "token:search",
		"reactor:invoke",
		"documents:create", "documents:read", "documents:reveal", "documents:delete",
		"token-intent:create", "token-intent:read", "token-intent:delete",
	},
	AppManagement: {
		"tenant:read", "tenant:update", "tenant:delete", "report:read", "log:read",
		"application:create", "application:read", "application:update", "application:delete",
		"proxy:create", "proxy:read", "proxy:update", "proxy:delete",
		"reactor:create", "reactor:read", "reactor:update", "reactor:delete",
		"keys:create", "keys:read", "keys:delete",
		"webhooks:create", "webhooks:read", "webhooks:update", "webhooks:delete",
	},
}

// permissionDescriptions say what each permission allows.
var permissionDescriptions = map[string]string{
	"token-intent:create": "Create token intents",
	"token-intent:read":   "Read token intents (never their data)",
	"token-intent:delete": "Delete token intents",

	"token:create":       "Create tokens",
	"token:read":         "Read tokens, with data as the access rules show it",
	"token:update":       "Update tokens",
	"token:delete":       "Delete tokens",
	"token:use":          "Use tokens in proxies and reactors (detokenize them)",
	"token:search":       "Search tokens",
	"reactor:invoke":     "Invoke reactors",
	"tenant:read":        "Read the tenant",
	"tenant:update":      "Update the tenant",
	"tenant:delete":      "Delete the tenant",
	"report:read":        "Read the tenant's usage report",
	"log:read":           "Read the tenant's audit log",
	"application:create": "Create applications",
	"application:read":   "Read applications",
	"application:update": "Update applications and manage their keys",
	"application:delete": "Delete applications",
	"proxy:create":       "Create proxies",
	"proxy:read":         "Read proxies",
	"proxy:update":       "Update proxies",
	"proxy:delete":       "Delete proxies",
	"reactor:create":     "Create reactors",
	"reactor:read":       "Read reactors",
	"reactor:update":     "Update reactors",
	"reactor:delete":     "Delete reactors",
	"keys:create":        "Create client encryption keys",
	"keys:read":          "Read client encryption keys' metadata",
	"keys:delete":        "Delete client encryption keys",
	"documents:create":   "Upload documents",
	"documents:read":     "Read documents' metadata",
	"documents:reveal":   "Download documents' content",
	"documents:delete":   "Delete documents",
	"webhooks:create":    "Create webhooks",
	"webhooks:read":      "Read webhooks, their event types and the webhook signing key",
	"webhooks:update":    "Update webhooks",
	"webhooks:delete":    "Delete webhooks",
}

// PermissionDescription says what a permission allows.
func PermissionDescription(p string) string { return permissionDescriptions[p] }

// PermissionsFor returns every permission an application of appType may
// hold, sorted; nil for an unknown type.
func PermissionsFor(appType string) []string {
	p := slices.Clone(permissionsByType[appType])
	sort.Strings(p)
	return p
}

// isPermission reports whether p is a permission of any application type.
func isPermission(p string) bool {
	for _, perms := range permissionsByType {
		if slices.Contains(perms, p) {
			return true
		}
	}
	return false
}

// AccessRule grants permissions on a container and its sub-containers,
// with the transform applied to token data returned under it. Rules are
// evaluated by ascending priority; the first that matches wins.
type AccessRule struct {
	Description string   `json:"description,omitempty"`
	Priority    int      `json:"priority"`
	Container   string   `json:"container"`
	Transform   string   `json:"transform"`
	Permissions []string `json:"permissions"`
}

var containerPattern = regexp.MustCompile(`^/(?:[a-z0-9_-]+/)*$`)

// NormalizeContainer lower-cases a container path and reports whether it
// is well formed: it starts and ends with "/" and its segments are made
// of a-z, 0-9, "_" and "-".
func NormalizeContainer(c string) (string, bool) {
	c = strings.ToLower(c)
	return c, containerPattern.MatchString(c)
}

// containerCovers reports whether a rule on parent applies to container.
func containerCovers(parent, container string) bool {
	return strings.HasPrefix(container, parent)
}

// Can reports whether the application holds perm at all, directly or
// through any access rule.
func (a *Application) Can(perm string) bool {
	if a.session != nil {
		return a.session.can(perm)
	}
	if slices.Contains(a.Permissions, perm) {
		return true
	}
	for _, r := range a.Rules {
		if slices.Contains(r.Permissions, perm) {
			return true
		}
	}
	return false
}

// Authorize decides a token operation on a container: it returns the
// transform for data the caller gets back, or a *PermissionError (an
// ErrForbidden) naming perm, and the container when access rules decided.
// With access rules the first rule by priority that covers the container
// and grants perm decides; with plain permissions, token:use reveals and
// every other permission masks.
func (a *Application) Authorize(perm, container string) (string, error) {
	return a.AuthorizeToken(perm, "", container)
}

// AuthorizeToken is Authorize for the token id in container: a session's
// rules may name token ids, which Authorize, knowing only the container,
// never matches.
func (a *Application) AuthorizeToken(perm, id, container string) (string, error) {
	if transform, ok := a.grantToken(perm, id, container); ok {
		return transform, nil
	}
	e := &PermissionError{Permission: perm}
	if len(a.Rules) > 0 || (a.session != nil && len(a.session.rules) > 0) {
		e.Container = container
	}
	return "", e
}

// grant is Authorize without the error, for scans that skip what the
// caller may not see.
func (a *Application) grant(perm, container string) (string, bool) {
	return a.grantToken(perm, "", container)
}

// grantToken is AuthorizeToken without the error.
func (a *Application) grantToken(perm, id, container string) (string, bool) {
	if a.session != nil {
		return a.session.grant(perm, id, container)
	}
	if len(a.Rules) == 0 {
		if !slices.Contains(a.Permissions, perm) {
			return "", false
		}
		if perm == "token:use" {
			return TransformReveal, true
		}
		return TransformMask, true
	}
	for _, r := range a.Rules { // kept sorted by priority
		if containerCovers(r.Container, container) && slices.Contains(r.Permissions, perm) {
			return r.Transform, true
		}
	}
	return "", false
}

// PermissionError is the ErrForbidden of an operation the caller's
// application may not do. It names the permission (a name from the
// permission table, never a submitted value) and, when access rules
// decided, the container of the token; it never holds token data.
type PermissionError struct {
	// Permission is the permission the operation needs, such as
	// "token:read".
	Permission string
	// Container is the token's container when the application's access
	// rules were searched for one that grants Permission on it; "" when
	// the application lacks the permission outright.
	Container string
	// Transform, when set, is the transform the grant must have: changing
	// a token's mask needs token:read with "reveal".
	Transform string
	// Action, when set, says what needed the permission ("changing a
	// token's mask"); the message then starts with it.
	Action string
}

// Error says which permission is missing, and where.
func (e *PermissionError) Error() string {
	what := e.Permission
	if e.Transform != "" {
		what += " with transform " + e.Transform
	}
	switch {
	case e.Action == "" && e.Container == "":
		return "the application lacks the permission " + what
	case e.Action == "":
		return "no access rule of the application gives " + what + " on container " + e.Container
	case e.Container == "":
		return e.Action + " needs the permission " + what + ", which the application lacks"
	}
	return e.Action + " needs " + what + " on container " + e.Container + ", which no access rule of the application gives"
}

// Is reports whether target is ErrForbidden, so that every
// PermissionError matches it.
func (e *PermissionError) Is(target error) bool { return target == ErrForbidden }

// validateGrants checks permissions and rules against the application
// type, normalizing rule containers and sorting rules by priority.
func validateGrants(appType string, perms []string, rules []AccessRule, v *ValidationError) {
	allowed := permissionsByType[appType]
	if allowed == nil {
		return // the type error is reported on its own
	}
	check := func(field string, list []string) {
		for i, p := range list {
			switch {
			case slices.Contains(allowed, p):
			case isPermission(p): // a known name is safe to repeat back
				v.Add(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("permission %q is not allowed for %s applications", p, appType))
			default:
				v.Add(fmt.Sprintf("%s[%d]", field, i), "unknown permission")
			}
		}
	}
	check("permissions", perms)
	if len(rules) > 0 && appType == AppManagement {
		v.Add("rules", "management applications do not support access rules")
		return
	}
	seen := map[int]bool{}
	for i := range rules {
		r := &rules[i]
		field := fmt.Sprintf("rules[%d]", i)
		if seen[r.Priority] {
			v.Add(field+".priority", "priority must be unique")
		}
		seen[r.Priority] = true
		c, ok := NormalizeContainer(r.Container)
		if !ok {
			v.Add(field+".container", "container must start and end with / and use only a-z, 0-9, _ and -")
		}
		r.Container = c
		switch r.Transform {
		case TransformReveal, TransformMask, TransformRedact:
		default:
			v.Add(field+".transform", "transform must be reveal, mask or redact")
		}
		if len(r.Permissions) == 0 {
			v.Add(field+".permissions", "at least one permission is required")
		}
		check(field+".permissions", r.Permissions)
		if utf8.RuneCountInString(r.Description) > 200 {
			v.Add(field+".description", "must be at most 200 characters")
		}
	}
	sort.SliceStable(rules, func(i, j int) bool { return rules[i].Priority < rules[j].Priority })
}
