package vaultstore

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The roles and application templates the vault ships with live in one
// reviewed file, templates.json, embedded in the binary. Every template
// is checked when the package loads, as POST /applications would check
// it, so a template always creates a valid application; a broken file
// stops the vault at start rather than failing a user later.

//go:embed templates.json
var templatesJSON []byte

// Template types of application templates.
const (
	TemplateStarters   = "starters"
	TemplatePayments   = "payments"
	TemplateBanking    = "banking"
	TemplatePII        = "pii"
	TemplateManagement = "management"
)

// Role is a permission group a management user (or a management
// application made for that user) holds.
type Role struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Permissions []string `json:"permissions"`
	// AllManagementPermissions, in the file, gives the role every
	// permission of management applications, present and future.
	AllManagementPermissions bool `json:"-"`
}

// ApplicationTemplate is a ready-made application: create one from it by
// sending its application_type (as type), permissions and rules to POST
// /applications with a name of your choice.
type ApplicationTemplate struct {
	ID              string       `json:"id"`
	Name            string       `json:"name"`
	Description     string       `json:"description"`
	ApplicationType string       `json:"application_type"`
	TemplateType    string       `json:"template_type"`
	IsStarter       bool         `json:"is_starter"`
	Permissions     []string     `json:"permissions"`
	Rules           []AccessRule `json:"rules"`
}

// catalog is the decoded templates.json.
type catalog struct {
	Roles []struct {
		Role
		All bool `json:"all_management_permissions"`
	} `json:"roles"`
	Templates []ApplicationTemplate `json:"application_templates"`
}

var (
	shippedRoles     []Role
	shippedTemplates []ApplicationTemplate
)

func init() {
	roles, templates, err := loadCatalog(templatesJSON)
	if err != nil {
		panic("vaultstore: templates.json: " + err.Error())
	}
	shippedRoles, shippedTemplates = roles, templates
}

// loadCatalog decodes and checks a catalog of roles and templates.
func loadCatalog(raw []byte) ([]Role, []ApplicationTemplate, error) {
	var c catalog
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, nil, err
	}
	var roles []Role
	seen := map[string]bool{}
	for _, r := range c.Roles {
		role := r.Role
		if role.Name == "" || seen[role.Name] {
			return nil, nil, fmt.Errorf("role %q: a role needs a unique name", role.Name)
		}
		seen[role.Name] = true
		if r.All {
			if len(role.Permissions) > 0 {
				return nil, nil, fmt.Errorf("role %s: all_management_permissions and permissions are exclusive", role.Name)
			}
			role.AllManagementPermissions = true
		}
		for _, p := range role.Permissions {
			if !slices.Contains(permissionsByType[AppManagement], p) {
				return nil, nil, fmt.Errorf("role %s: %q is not a management permission", role.Name, p)
			}
		}
		roles = append(roles, role)
	}
	for i := range c.Templates {
		t := &c.Templates[i]
		if !isID(t.ID) || seen[t.ID] {
			return nil, nil, fmt.Errorf("template %q: the id must be a unique UUID", t.ID)
		}
		seen[t.ID] = true
		switch t.TemplateType {
		case TemplateStarters, TemplatePayments, TemplateBanking, TemplatePII, TemplateManagement:
		default:
			return nil, nil, fmt.Errorf("template %s: unknown template_type %q", t.ID, t.TemplateType)
		}
		if t.Description == "" {
			return nil, nil, fmt.Errorf("template %s: a description is required", t.ID)
		}
		in := ApplicationInput{Name: t.Name, Type: t.ApplicationType, Permissions: t.Permissions, Rules: t.Rules}
		if err := in.validate(t.ApplicationType); err != nil {
			return nil, nil, fmt.Errorf("template %s does not make a valid application: %w", t.ID, err)
		}
		if t.Permissions == nil {
			t.Permissions = []string{}
		}
		if t.Rules == nil {
			t.Rules = []AccessRule{}
		}
	}
	return roles, c.Templates, nil
}

// Roles returns the roles management users can hold, with their
// permissions.
func Roles() []Role {
	out := make([]Role, len(shippedRoles))
	for i, r := range shippedRoles {
		out[i] = r
		if r.AllManagementPermissions {
			out[i].Permissions = PermissionsFor(AppManagement)
		} else {
			out[i].Permissions = slices.Clone(r.Permissions)
		}
	}
	return out
}

// ApplicationTemplates returns the templates the vault ships with, in the
// file's order.
func ApplicationTemplates() []ApplicationTemplate {
	out := make([]ApplicationTemplate, len(shippedTemplates))
	for i, t := range shippedTemplates {
		out[i] = t.clone()
	}
	return out
}

// GetApplicationTemplate returns the template with id, or ErrNotFound.
func GetApplicationTemplate(id string) (*ApplicationTemplate, error) {
	for _, t := range shippedTemplates {
		if t.ID == strings.ToLower(id) {
			c := t.clone()
			return &c, nil
		}
	}
	return nil, ErrNotFound
}

func (t ApplicationTemplate) clone() ApplicationTemplate {
	t.Permissions = slices.Clone(t.Permissions)
	rules := make([]AccessRule, len(t.Rules))
	for i, r := range t.Rules {
		r.Permissions = slices.Clone(r.Permissions)
		rules[i] = r
	}
	t.Rules = rules
	return t
}
