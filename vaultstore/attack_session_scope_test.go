package vaultstore

import "testing"

// TestSessionRuleGrantsOnlyTokenPermissions: a session stored with a rule
// that names a document or intent permission (as the authorization
// allowed before it refused them) grants none of them: a rule names
// tokens, and those records are none. Its token permissions still hold,
// and the same permissions given plainly are granted.
func TestSessionRuleGrantsOnlyTokenPermissions(t *testing.T) {
	others := []string{"documents:create", "documents:read", "documents:reveal", "documents:delete",
		"token-intent:create", "token-intent:read", "token-intent:delete"}
	authorizer := &Application{ID: "auth", Type: AppPrivate, Permissions: append([]string{"token:read", "reactor:invoke"}, others...)}
	ruled := &sessionGrant{authorizer: authorizer, rules: []SessionRule{{
		Priority: 1, Transform: TransformReveal, Permissions: append([]string{"token:read", "reactor:invoke"}, others...),
		Conditions: []Condition{{Attribute: ConditionAttributeID, Operator: ConditionEquals, Value: "tok-a"}},
	}}}
	plain := &sessionGrant{authorizer: authorizer, permissions: others}
	for _, p := range others {
		if ruled.can(p) {
			t.Errorf("a rule on one token id grants %s", p)
		}
		if !plain.can(p) {
			t.Errorf("%s given plainly is not granted", p)
		}
	}
	for _, p := range []string{"token:read", "reactor:invoke"} {
		if !ruled.can(p) {
			t.Errorf("the rule no longer grants %s", p)
		}
	}
	if _, ok := ruled.grant("token:read", "tok-b", "/general/"); ok {
		t.Error("the rule grants token:read on another token")
	}
}
