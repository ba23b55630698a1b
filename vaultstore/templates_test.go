package vaultstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// Every shipped template creates the application it describes, with the
// grants it lists, through the same path as POST /applications.
func TestApplicationTemplatesCreateValidApplications(t *testing.T) {
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	templates := ApplicationTemplates()
	if len(templates) < 5 {
		t.Fatalf("%d templates shipped", len(templates))
	}
	types := map[string]bool{}
	for _, tpl := range templates {
		app, key, err := s.CreateApplication(context.Background(), ct.Tenant.ID, "actor", ApplicationInput{
			Name: tpl.Name, Type: tpl.ApplicationType, Permissions: tpl.Permissions, Rules: tpl.Rules,
		})
		if err != nil {
			t.Fatalf("template %s (%s): %v", tpl.ID, tpl.Name, err)
		}
		if app.Type != tpl.ApplicationType || key == nil || !slices.Equal(app.Permissions, normalizePermissions(tpl.Permissions)) || len(app.Rules) != len(tpl.Rules) {
			t.Fatalf("application from template %s = %+v", tpl.ID, app)
		}
		types[tpl.ApplicationType] = true
		got, err := GetApplicationTemplate(strings.ToUpper(tpl.ID))
		if err != nil || got.Name != tpl.Name {
			t.Fatalf("GetApplicationTemplate(%s) = %v, %v", tpl.ID, got, err)
		}
	}
	for _, typ := range []string{AppPublic, AppPrivate, AppManagement} {
		if !types[typ] {
			t.Errorf("no template makes a %s application", typ)
		}
	}
	if _, err := GetApplicationTemplate("00000000-0000-4000-8000-000000000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown template: %v", err)
	}
	// callers get copies: changing one changes nothing shipped
	templates[1].Rules[0].Permissions[0] = "changed"
	if ApplicationTemplates()[1].Rules[0].Permissions[0] == "changed" {
		t.Fatal("ApplicationTemplates shares its slices")
	}
}

func TestRolesHoldManagementPermissions(t *testing.T) {
	roles := Roles()
	names := map[string]Role{}
	for _, r := range roles {
		names[r.Name] = r
		if len(r.Permissions) == 0 || r.Description == "" {
			t.Errorf("role %+v is empty", r)
		}
	}
	if !slices.Equal(names["ADMIN"].Permissions, PermissionsFor(AppManagement)) {
		t.Errorf("ADMIN = %v, want every management permission", names["ADMIN"].Permissions)
	}
	if slices.ContainsFunc(names["READ_ONLY"].Permissions, func(p string) bool { return !strings.HasSuffix(p, ":read") }) {
		t.Errorf("READ_ONLY holds a write: %v", names["READ_ONLY"].Permissions)
	}
}

func TestLoadCatalogRefusesBrokenFiles(t *testing.T) {
	tpl := func(body string) string {
		return `{"roles":[],"application_templates":[{"id":"eba2ba30-008a-41c8-b386-1b26616a710f","name":"N","description":"D","template_type":"starters",` + body + `}]}`
	}
	for name, raw := range map[string]string{
		"not json":            `{`,
		"unknown field":       `{"roles":[],"application_templates":[],"extra":1}`,
		"role without name":   `{"roles":[{"description":"x","permissions":["tenant:read"]}],"application_templates":[]}`,
		"role non-management": `{"roles":[{"name":"X","description":"x","permissions":["token:read"]}],"application_templates":[]}`,
		"role all and list":   `{"roles":[{"name":"X","description":"x","all_management_permissions":true,"permissions":["tenant:read"]}],"application_templates":[]}`,
		"bad id":              `{"roles":[],"application_templates":[{"id":"x","name":"N","description":"D","application_type":"public","template_type":"starters","permissions":["token:create"]}]}`,
		"bad template type":   `{"roles":[],"application_templates":[{"id":"eba2ba30-008a-41c8-b386-1b26616a710f","name":"N","description":"D","application_type":"public","template_type":"x","permissions":["token:create"]}]}`,
		"public reads":        tpl(`"application_type":"public","permissions":["token:read"]`),
		"bad app type":        tpl(`"application_type":"root","permissions":["token:read"]`),
		"bad rule":            tpl(`"application_type":"private","rules":[{"priority":1,"container":"pci","transform":"reveal","permissions":["token:read"]}]`),
	} {
		if _, _, err := loadCatalog([]byte(raw)); err == nil {
			t.Errorf("%s: loadCatalog accepted it", name)
		}
	}
}
