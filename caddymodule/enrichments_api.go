package caddymodule

import (
	"net/http"
)

// getCardDetails: GET /enrichments/card-details?bin=…, what the vault
// knows of a BIN of 6 to 8 digits: its brand by the published IIN ranges
// and, when the operator loaded a BIN table, funding, issuer, issuer
// country, segment and product. Any API key may ask (the BIN is not
// secret, and public applications use it to show a card's brand); a
// BIN the vault knows nothing of answers {}.
func getCardDetails(c *call) error {
	bins := c.r.URL.Query()["bin"]
	if len(bins) > 1 {
		return errField("bin", "give bin once")
	}
	bin := ""
	if len(bins) == 1 {
		bin = bins[0]
	}
	d, err := c.store.CardDetailsForBIN(bin)
	if err != nil {
		return err
	}
	return writeJSON(c.w, http.StatusOK, d)
}
