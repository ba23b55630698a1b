package caddymodule

import (
	"net/http"

	"github.com/tokenvault/tokenvault/vaultstore"
)

// tokenIntentBody is the body of POST /token-intents as sent: the data in
// clear, or (Encrypted) encrypted on the client to one of the tenant's
// keys.
type tokenIntentBody struct {
	Type      string  `json:"type"`
	Data      any     `json:"data"`
	Encrypted *string `json:"encrypted"` // present, even empty, as POST /tokens reads it
}

// decodeTokenIntentInput reads the body of POST /token-intents into the
// intent's type and data. It is the one place an intent's data comes in:
// client-side encryption (an "encrypted" member holding a JWE) is decoded
// here, before the store validates the data as a token of its type would
// be.
func decodeTokenIntentInput(c *call) (vaultstore.TokenIntentInput, error) {
	var body tokenIntentBody
	if err := c.decode(&body); err != nil {
		return vaultstore.TokenIntentInput{}, err
	}
	if err := c.encryptedData(body.Encrypted, &body.Data, ""); err != nil {
		return vaultstore.TokenIntentInput{}, err
	}
	return vaultstore.TokenIntentInput{Type: body.Type, Data: body.Data}, nil
}

// createTokenIntent: POST /token-intents {type, data}, 201 with the
// intent: its details and fingerprint, never its data.
func createTokenIntent(c *call) error {
	in, err := decodeTokenIntentInput(c)
	if err != nil {
		return err
	}
	ti, err := c.store.CreateTokenIntent(c.ctx(), c.tokenRequest(), in)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusCreated, ti)
}

// getTokenIntent: GET /token-intents/{id}.
func getTokenIntent(c *call) error {
	ti, err := c.store.GetTokenIntent(c.ctx(), c.tokenRequest(), c.params["id"])
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, ti)
}

// deleteTokenIntent: DELETE /token-intents/{id}.
func deleteTokenIntent(c *call) error {
	if err := c.store.DeleteTokenIntent(c.ctx(), c.tokenRequest(), c.params["id"]); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
