package vaultstore

import (
	"strings"
)

// Card and bank details: what a card or bank token shows of its data to
// every reader, whatever the transform of its access rule. They are
// derived from the data when the token is written and sealed with the
// record; a record written before they existed gets them derived when it
// is read (deriveDetails), so no migration is needed. They are capped at
// what PCI DSS allows to be displayed: the BIN (the first 8 digits of a
// number of 16 digits or more, else the first 6) and the last four.
//
// Fields that need a BIN database (funding, issuer, issuer_country,
// segment, product) come only from the operator's BIN table (BINTable),
// looked up when the details are shown, so a newer table applies to
// every token; without a table they are absent, never guessed.

// CardDetails are the details of a card: the wire shape of the official
// SDKs' CardDetails.
type CardDetails struct {
	BIN             string             `json:"bin,omitempty"`
	Last4           string             `json:"last4,omitempty"`
	ExpirationMonth int                `json:"expiration_month,omitempty"`
	ExpirationYear  int                `json:"expiration_year,omitempty"`
	Brand           string             `json:"brand,omitempty"`
	Funding         string             `json:"funding,omitempty"`
	Issuer          *CardIssuer        `json:"issuer,omitempty"`
	IssuerCountry   *CardIssuerCountry `json:"issuer_country,omitempty"`
	Segment         string             `json:"segment,omitempty"`
	Product         *CardProduct       `json:"product,omitempty"`
}

// CardIssuer names the bank that issued a card.
type CardIssuer struct {
	Country string `json:"country,omitempty"`
	Name    string `json:"name,omitempty"`
}

// CardIssuerCountry is the country of a card's issuer (ISO 3166-1).
type CardIssuerCountry struct {
	Alpha2  string `json:"alpha2,omitempty"`
	Name    string `json:"name,omitempty"`
	Numeric string `json:"numeric,omitempty"`
}

// CardProduct is the network's product code of a card ("F" for Visa
// Classic, "MCS" for Mastercard Standard, ...), and its name.
type CardProduct struct {
	Code string `json:"code,omitempty"`
	Name string `json:"name,omitempty"`
}

// BankDetails are the details of a bank account: the wire shape of the
// official SDKs' BankDetails.
type BankDetails struct {
	RoutingNumber      string `json:"routing_number,omitempty"`
	AccountNumberLast4 string `json:"account_number_last4,omitempty"`
}

// Card brands, as the vendor's SDKs and elements name them.
const (
	BrandVisa            = "visa"
	BrandMastercard      = "mastercard"
	BrandAmericanExpress = "american-express"
	BrandDiscover        = "discover"
	BrandJCB             = "jcb"
	BrandDinersClub      = "diners-club"
	BrandUnionPay        = "unionpay"
	BrandMaestro         = "maestro"
)

// iinRange is a range of issuer identification numbers: every number
// whose first len(lo) digits lie in [lo, hi] belongs to brand.
type iinRange struct {
	lo, hi string // same length
	brand  string
}

// iinRanges are the published IIN ranges of the major networks (the
// networks' own rules as summarised by ISO/IEC 7812 registries). Where
// ranges overlap the longest one wins: Discover's 622126-622925 inside
// UnionPay's 62, Maestro's 6759 and 6761-6763 and the 5018/5020/5038/5893
// prefixes beside Mastercard's 51-55.
var iinRanges = []iinRange{
	{"4", "4", BrandVisa},
	{"51", "55", BrandMastercard},
	{"2221", "2720", BrandMastercard},
	{"34", "34", BrandAmericanExpress},
	{"37", "37", BrandAmericanExpress},
	{"6011", "6011", BrandDiscover},
	{"644", "649", BrandDiscover},
	{"65", "65", BrandDiscover},
	{"622126", "622925", BrandDiscover},
	{"3528", "3589", BrandJCB},
	{"36", "36", BrandDinersClub},
	{"300", "305", BrandDinersClub},
	{"3095", "3095", BrandDinersClub},
	{"38", "39", BrandDinersClub},
	{"62", "62", BrandUnionPay},
	{"8100", "8171", BrandUnionPay},
	{"5018", "5018", BrandMaestro},
	{"5020", "5020", BrandMaestro},
	{"5038", "5038", BrandMaestro},
	{"5893", "5893", BrandMaestro},
	{"6304", "6304", BrandMaestro},
	{"6759", "6759", BrandMaestro},
	{"6761", "6763", BrandMaestro},
	{"676770", "676770", BrandMaestro}, // Maestro UK
	{"676774", "676774", BrandMaestro},
}

// CardBrand returns the brand of a card number or BIN by the published
// IIN ranges, the most specific range winning; "" when none matches.
func CardBrand(digits string) string {
	brand, best := "", 0
	for _, r := range iinRanges {
		n := len(r.lo)
		if n <= best || len(digits) < n {
			continue
		}
		if p := digits[:n]; p >= r.lo && p <= r.hi {
			brand, best = r.brand, n
		}
	}
	return brand
}

// BINOf returns the BIN PCI DSS allows to show of a card number: its
// first 8 digits when it has 16 or more, else its first 6.
func BINOf(number string) string {
	if len(number) >= 16 {
		return number[:8]
	}
	return number[:min(6, len(number))]
}

// last4 returns the last four characters of s (all of a shorter s).
func last4(s string) string { return s[max(0, len(s)-4):] }

// deriveDetails computes the stored details of a token's data: card
// details for a card, bank details for a bank account, nothing for other
// types or for data without a valid number.
func deriveDetails(tokenType string, data any) (*CardDetails, *BankDetails) {
	m, ok := data.(map[string]any)
	if !ok {
		return nil, nil
	}
	switch tokenType {
	case TokenTypeCard:
		number, _ := m["number"].(string)
		if len(number) < 13 || !isASCIIDigits(number) {
			return nil, nil
		}
		d := &CardDetails{BIN: BINOf(number), Last4: last4(number), Brand: CardBrand(number)}
		if n, ok := jsonInteger(m["expiration_month"]); ok && n >= 1 && n <= 12 {
			d.ExpirationMonth = int(n)
		}
		if n, ok := jsonInteger(m["expiration_year"]); ok && n >= 1000 && n <= 9999 {
			d.ExpirationYear = int(n)
		}
		return d, nil
	case TokenTypeBank:
		routing, _ := m["routing_number"].(string)
		account, _ := m["account_number"].(string)
		if routing == "" || account == "" || !isASCIIDigits(routing) || !isASCIIDigits(account) {
			return nil, nil
		}
		return nil, &BankDetails{RoutingNumber: routing, AccountNumberLast4: last4(account)}
	}
	return nil, nil
}

// withBINTable returns a copy of stored card details with what the BIN
// table knows of their BIN; nil stays nil. The stored details are never
// changed (records may be shared by caches).
func (t *BINTable) withBINTable(d *CardDetails) *CardDetails {
	if d == nil {
		return nil
	}
	out := &CardDetails{BIN: d.BIN, Last4: d.Last4, ExpirationMonth: d.ExpirationMonth,
		ExpirationYear: d.ExpirationYear, Brand: d.Brand}
	t.enrich(out)
	return out
}

// details returns the details a reader of rec sees: the stored ones
// with what the BIN table knows, or, for a record written before details
// were stored, the same derived from its data now.
func (s *Store) details(rec *tokenRecord) (*CardDetails, *BankDetails) {
	card, bank := rec.Card, rec.Bank
	if card == nil && bank == nil {
		card, bank = deriveDetails(rec.Type, rec.Data)
	}
	if bank != nil {
		b := *bank
		bank = &b
	}
	return s.BINTable().withBINTable(card), bank
}

// CardDetailsForBIN answers GET /enrichments/card-details: what the vault
// knows of a BIN of 6 to 8 digits (its brand by the IIN ranges, the rest
// from the BIN table). Any other value is a *ValidationError on "bin".
func (s *Store) CardDetailsForBIN(bin string) (*CardDetails, error) {
	if bin == "" {
		return nil, invalid("bin", "bin is required")
	}
	if len(bin) < 6 || len(bin) > 8 || !isASCIIDigits(bin) {
		return nil, invalid("bin", "bin must be 6 to 8 digits 0-9")
	}
	d := &CardDetails{BIN: bin, Brand: CardBrand(bin)}
	s.BINTable().enrich(d)
	d.BIN = "" // the caller's own input; the answer is what is known of it
	return d, nil
}

// normalizeBrand lower-cases a brand for comparison in searches.
func normalizeBrand(b string) string { return strings.ToLower(strings.TrimSpace(b)) }
