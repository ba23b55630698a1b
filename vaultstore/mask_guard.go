package vaultstore

import (
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"

	"github.com/tokenvault/tokenvault/internal/bounded"
	"github.com/tokenvault/tokenvault/vaultstore/expr"
)

// What a mask or a token id may show of a card or bank number.
//
// PCI DSS lets a displayed card number (PAN) show at most its BIN and its
// last four digits (PCI DSS 3.4.1; FAQ 1492: a BIN of 8 digits for numbers
// of 16 digits or more, else 6). A mask is a template anyone with
// token:create may write and every masked reader sees evaluated, and a
// token id is shown to every reader and in every list, so the vault
// enforces the cap itself, on what a mask or an id evaluates to, whatever
// the template: filters can copy, slice, reverse, space out, re-encode
// (replace, arithmetic) or branch on the digits, and no reading of the
// template could follow them all.
//
// The digits a mask may not show are the hidden ones: a card number's
// digits between its BIN and its last four, and a bank account number's
// digits before its last four. The template is evaluated over the data
// and over copies of the data whose hidden digits are each changed to
// another random digit (probes); a result that differs between them
// depends on the hidden digits, in whatever form, and is refused. The
// alias filters draw the same random characters in every one of these
// evaluations (expr.EvaluateJSONEach), so they compare equal unless the
// data makes them differ. What does not depend on the data (text written
// in the template itself) is checked apart: the template is evaluated over
// copies with every digit of the data changed (blinds), and a result that
// holds the whole number (its digits in order or reversed, whatever lies
// between them) in every blind was written out by the template. The
// template's own text, shown to readers as the token's mask, may not hold
// the number either. Since the data other than the hidden digits is the
// same in every comparison, showing the BIN, the last four, the expiry or
// the routing number never trips the check.

// Data members of cards and banks whose digits are guarded.
const (
	cardNumberMember  = "number"
	bankAccountMember = "account_number"
)

const (
	// guardProbes is how many probes a mask or an id is evaluated over
	// besides the data. Every probe changes every hidden digit, so any
	// result that carries a hidden digit differs in each one; two catch
	// a result that carries less (a digit's parity, say) at least 80% of
	// the time.
	guardProbes = 2
	// guardBlinds is how many blinds a mask is evaluated over; the number
	// must turn up in all of them, so a chance match of the changed
	// digits cannot make it look written out.
	guardBlinds = 2
	// maskDraws is how many times a mask that draws random characters is
	// checked when it is written: it may show the hidden digits only for
	// some draws. Whatever passes here, every masked read checks the
	// draw it shows.
	maskDraws = 8
	// idDraws is how many times an id expression that draws random
	// characters (the alias filters) is drawn before its refusal stands:
	// an alias of a 16-digit number passes the Luhn check one time in 10
	// by chance, and is then drawn again.
	idDraws = 12
	// looseMatchMinDigits: a number at least this long is found in a text
	// whatever separates its digits there; a shorter one only in a run of
	// digits joined by spaces or dashes, since short numbers turn up by
	// chance among the digits of ids such as UUIDs.
	looseMatchMinDigits = 7
)

// errMaskShowsNumber: a stored mask could show more of the number than
// allowed; a masked read leaves the data out.
var errMaskShowsNumber = errors.New("the mask could show more of the number than allowed")

// hiddenNumber is a card or bank number and the digits of it that masks
// and ids may not show: digits[lo:hi].
type hiddenNumber struct {
	tokenType string
	member    string // the data member holding the number
	digits    string
	lo, hi    int
}

// hiddenNumberOf returns the guarded number of card or bank data; ok is
// false for other types, and for data without hidden digits (a bank
// account of at most four digits).
func hiddenNumberOf(tokenType string, data any) (h hiddenNumber, ok bool) {
	m, isMap := data.(map[string]any)
	if !isMap {
		return h, false
	}
	switch tokenType {
	case TokenTypeCard:
		n, _ := m[cardNumberMember].(string)
		if !isASCIIDigits(n) {
			return h, false
		}
		h = hiddenNumber{tokenType: tokenType, member: cardNumberMember, digits: n, lo: cardBINLength(len(n)), hi: len(n) - 4}
	case TokenTypeBank:
		a, _ := m[bankAccountMember].(string)
		if !isASCIIDigits(a) {
			return h, false
		}
		h = hiddenNumber{tokenType: tokenType, member: bankAccountMember, digits: a, lo: 0, hi: len(a) - 4}
	default:
		return h, false
	}
	return h, h.hi > h.lo
}

// cardBINLength is how many leading digits of a card number a mask may
// show: 8 for numbers of 16 digits or more, else 6.
func cardBINLength(n int) int {
	if n >= 16 {
		return 8
	}
	return 6
}

// maskRule says what a mask of the number's token type may show.
func (h hiddenNumber) maskRule() string {
	if h.tokenType == TokenTypeBank {
		return "a bank token's mask may show at most the account number's last 4 digits"
	}
	return "a card token's mask may show at most the card number's BIN (its first 8 digits, or 6 for numbers under 16 digits) and its last 4 digits"
}

// idRule says what an id of the number's token type may show.
func (h hiddenNumber) idRule() string {
	if h.tokenType == TokenTypeBank {
		return "a bank token's id may show at most the account number's last 4 digits"
	}
	return "a card token's id may show at most the card number's BIN and its last 4 digits"
}

// probe returns a copy of data whose hidden digits are each replaced by
// another random digit.
func (h hiddenNumber) probe(data map[string]any) map[string]any {
	out := maps.Clone(data)
	out[h.member] = changeDigits(h.digits, h.lo, h.hi)
	return out
}

// blind returns a copy of data in which every digit of every number
// written as a string (the routing number too) is changed.
func blind(data map[string]any) map[string]any {
	out := maps.Clone(data)
	for k, v := range data {
		if s, ok := v.(string); ok && isASCIIDigits(s) {
			out[k] = changeDigits(s, 0, len(s))
		}
	}
	return out
}

// changeDigits replaces each ASCII digit of s[lo:hi] by another random
// digit.
func changeDigits(s string, lo, hi int) string {
	b := []byte(s)
	for i := lo; i < hi; i++ {
		b[i] = '0' + byte((int(b[i]-'0')+1+rand.IntN(9))%10)
	}
	return string(b)
}

// exposure is what an evaluation of a mask or an id shows of a number.
type exposure int

const (
	// showsNothing: the result shows at most what is allowed.
	showsNothing exposure = iota
	// showsHidden: the result depends on the hidden digits.
	showsHidden
	// showsWritten: the template writes the whole number out itself.
	showsWritten
	// showsWhole: the result holds the whole card number in one run of
	// digits, made of allowed parts (an expiry year equal to the hidden
	// digits) or drawn by an alias filter that happened on them.
	showsWhole
)

// evaluate evaluates template (a mask, or an id expression) over data and
// its probes, and with blinds set (masks) over as many blinds, and says
// what the result shows. err is the evaluation's failure over data;
// random reports that the template drew random characters, so another
// evaluation could tell otherwise.
func (h hiddenNumber) evaluate(template any, data map[string]any, blinds int) (out any, shows exposure, random bool, err error) {
	bindings := make([]map[string]any, 0, 1+guardProbes+blinds)
	bindings = append(bindings, map[string]any{"data": data})
	for range guardProbes {
		bindings = append(bindings, map[string]any{"data": h.probe(data)})
	}
	for range blinds {
		bindings = append(bindings, map[string]any{"data": blind(data)})
	}
	outs, errs, random := expr.EvaluateJSONEach(template, bindings...)
	if errs[0] != nil {
		return nil, showsNothing, random, errs[0]
	}
	for i := 1; i <= guardProbes; i++ {
		// a probe that fails where the data does not also depends on
		// the hidden digits
		if errs[i] != nil || !reflect.DeepEqual(outs[i], outs[0]) {
			return outs[0], showsHidden, random, nil
		}
	}
	if blinds == 0 {
		return outs[0], showsNothing, random, nil
	}
	written := true
	for i := 1 + guardProbes; i < len(outs); i++ {
		if errs[i] != nil || !h.inDigits(digitsOfValue(outs[i])) {
			written = false
			break
		}
	}
	switch {
	case written:
		return outs[0], showsWritten, random, nil
	case h.tokenType == TokenTypeCard && h.inRuns(outs[0]):
		// the whole card number in one run of digits is a card number
		// shown, however it came about
		return outs[0], showsWhole, random, nil
	}
	return outs[0], showsNothing, random, nil
}

// inDigits reports whether a text's digits hold the number, in order or
// reversed.
func (h hiddenNumber) inDigits(digits string) bool {
	return strings.Contains(digits, h.digits) || strings.Contains(digits, reverseString(h.digits))
}

// inRuns reports whether a run of digits (spaces or dashes between them
// allowed) in any string of a value holds the number, in order or
// reversed.
func (h hiddenNumber) inRuns(v any) bool {
	found := false
	walkStrings(v, 0, func(s string) {
		for _, run := range digitRuns(s) {
			found = found || h.inDigits(run)
		}
	})
	return found
}

// inTemplate reports whether any string of a template (member names
// included) holds the number, in order or reversed, whatever separates
// its digits.
func (h hiddenNumber) inTemplate(template any) bool {
	found := false
	walkStrings(template, 0, func(s string) {
		found = found || h.inDigits(digitsOf(s))
	})
	return found
}

// inID reports whether an id holds the number, in order or reversed
// (see looseMatchMinDigits).
func (h hiddenNumber) inID(id string) bool {
	if len(h.digits) >= looseMatchMinDigits {
		return h.inDigits(digitsOf(id))
	}
	for _, run := range digitRuns(id) {
		if h.inDigits(run) {
			return true
		}
	}
	return false
}

// checkMask refuses a card or bank mask that could show more of the
// number than allowed, evaluated over data (without the CVC). A mask
// that fails over the data is not refused here: a masked read of it
// leaves the data out.
func checkMask(tokenType string, mask, data any) error {
	h, ok := hiddenNumberOf(tokenType, data)
	if !ok || mask == nil || isDefaultMask(tokenType, mask) {
		return nil
	}
	if h.inTemplate(mask) {
		return invalid("mask", h.maskRule())
	}
	wholes := 0
	for range maskDraws {
		_, shows, random, err := h.evaluate(mask, data.(map[string]any), guardBlinds)
		switch {
		case err != nil:
			return nil
		case shows == showsHidden || shows == showsWritten || (shows == showsWhole && !random):
			return invalid("mask", h.maskRule())
		case shows == showsWhole:
			// an alias drew the hidden digits by chance: that read will
			// leave the data out, but the mask is no leak
			wholes++
		}
		if !random {
			return nil
		}
	}
	if wholes == maskDraws {
		return invalid("mask", h.maskRule())
	}
	return nil
}

// evaluateMask evaluates a token's mask over its data (without the CVC).
// A card or bank mask that could show more of the number than allowed
// (one stored before the vault refused them) gives errMaskShowsNumber.
func evaluateMask(rec *tokenRecord) (any, error) {
	bindings := map[string]any{"data": rec.Data}
	h, ok := hiddenNumberOf(rec.Type, rec.Data)
	if !ok || isDefaultMask(rec.Type, rec.Mask) {
		return expr.EvaluateJSON(rec.Mask, bindings)
	}
	key := safeMaskKey(rec)
	if _, ok := safeMasks.Get(key); ok && key != "" {
		return expr.EvaluateJSON(rec.Mask, bindings)
	}
	if h.inTemplate(rec.Mask) {
		return nil, errMaskShowsNumber
	}
	out, shows, random, err := h.evaluate(rec.Mask, rec.Data.(map[string]any), guardBlinds)
	if err != nil {
		return nil, err
	}
	if shows != showsNothing {
		return nil, errMaskShowsNumber
	}
	if !random && key != "" {
		safeMasks.Put(key, struct{}{})
	}
	return out, nil
}

// safeMasks remembers the masks found to show nothing they may not over
// a token's data, when they draw no random characters: their result is
// the same at every read, and so is the verdict. Keys are safeMaskKey's.
var safeMasks = bounded.New[struct{}](4096)

// safeMaskProcessKey keys safeMaskKey; it never leaves the process.
var safeMaskProcessKey = func() []byte {
	k := make([]byte, 32)
	crand.Read(k) // never fails (Go 1.24+ crashes the program instead)
	return k
}()

// safeMaskKey names a token's type, mask and data (without the CVC) in
// safeMasks: an HMAC under a key drawn when the process starts, so the
// cache holds nothing from which the data could be learnt. "" when they
// cannot be encoded.
func safeMaskKey(rec *tokenRecord) string {
	raw, err := json.Marshal([]any{rec.Type, rec.Mask, rec.Data})
	if err != nil {
		return ""
	}
	mac := hmac.New(sha256.New, safeMaskProcessKey)
	mac.Write(raw)
	return string(mac.Sum(nil))
}

// maskTemplateShowsNumber reports whether a token's stored mask template,
// which readers see as the token's mask, holds its number.
func maskTemplateShowsNumber(rec *tokenRecord) bool {
	if rec.Mask == nil || isDefaultMask(rec.Type, rec.Mask) {
		return false
	}
	h, ok := hiddenNumberOf(rec.Type, rec.Data)
	return ok && h.inTemplate(rec.Mask)
}

// defaultMasks are the card and bank types' default masks, which show
// only what is allowed: they are not evaluated more than once.
var defaultMasks = func() map[string]any {
	out := map[string]any{}
	for _, name := range []string{TokenTypeCard, TokenTypeBank} {
		typ, _ := LookupTokenType(name)
		out[name] = typ.DefaultMask
	}
	return out
}()

// isDefaultMask reports whether mask is its token type's default mask.
func isDefaultMask(tokenType string, mask any) bool {
	def, ok := defaultMasks[tokenType]
	if !ok {
		return false
	}
	m, isMap := mask.(map[string]any)
	d, defIsMap := def.(map[string]any)
	if isMap && defIsMap {
		return sameTemplates(m, d)
	}
	return reflect.DeepEqual(mask, def)
}

// sameTemplates is reflect.DeepEqual(m, d) for a default mask d of string
// templates, without reflection: a create and a read ask for every card
// and bank token, a few times each.
func sameTemplates(m, d map[string]any) bool {
	if len(m) != len(d) {
		return false
	}
	for k, dv := range d {
		ds, ok := dv.(string)
		if !ok {
			return reflect.DeepEqual(m, d)
		}
		if ms, ok := m[k].(string); !ok || ms != ds {
			return false
		}
	}
	return true
}

// checkTokenID refuses a card or bank token id (after any expression was
// evaluated) that holds the card or account number, in order or
// reversed, or a run of 13 to 19 digits (spaces or dashes between them
// allowed) that passes the Luhn check and so reads as a card number.
func checkTokenID(tokenType, id string, data any) error {
	if tokenType != TokenTypeCard && tokenType != TokenTypeBank {
		return nil
	}
	if h, ok := hiddenNumberOf(tokenType, data); ok && h.inID(id) {
		if tokenType == TokenTypeBank {
			return invalid("id", "must not contain the account number")
		}
		return invalid("id", "must not contain the card number")
	}
	if luhnRunIn(id) {
		return invalid("id", "must not contain a run of 13 to 19 digits that passes the Luhn check: it would read as a card number")
	}
	return nil
}

// evaluateGuardedID evaluates a card or bank token's id expression. The
// id may not depend on the number's hidden digits (see the top of this
// file), and must pass checkTokenID. An id made with the alias filters is
// random: when it fails checkTokenID it is drawn again, up to idDraws
// times, so an alias that happens to pass the Luhn check, or to equal
// the number, is never kept and never refused; an expression that gives
// the same failing id three times in a row is refused at once (twice is
// not enough: an alias of 4 random digits repeats a failing draw one time
// in 10,000, which refused about one create in 100,000 at random).
func evaluateGuardedID(tokenType, src string, data any) (string, error) {
	h, hidden := hiddenNumberOf(tokenType, data)
	m, _ := data.(map[string]any)
	var (
		last    string
		repeats int // draws in a row that gave last
		lastErr error
	)
	for draw := 0; draw < idDraws; draw++ {
		var (
			out   any
			shows exposure
			err   error
		)
		if hidden {
			out, shows, _, err = h.evaluate(src, m, 0)
		} else {
			outs, errs, _ := expr.EvaluateJSONEach(src, map[string]any{"data": data})
			out, err = outs[0], errs[0]
		}
		if err != nil {
			return "", invalid("id", err.Error())
		}
		if shows != showsNothing {
			return "", invalid("id", h.idRule())
		}
		id, err := stringOf(out)
		if err != nil {
			return "", invalid("id", "the expression's value cannot be an id")
		}
		if err := ValidateTokenID(id); err != nil {
			return "", err
		}
		if lastErr = checkTokenID(tokenType, id, data); lastErr == nil {
			return id, nil
		}
		if draw > 0 && id == last {
			if repeats++; repeats == 2 {
				break // not random: drawing again gives the same id
			}
		} else {
			repeats = 0
		}
		last = id
	}
	return "", lastErr
}

// luhnRunIn reports whether s holds a run of 13 to 19 digits, single
// spaces or dashes between them allowed, that passes the Luhn check.
// Longer runs are not card numbers.
func luhnRunIn(s string) bool {
	for _, run := range digitRuns(s) {
		if len(run) >= 13 && len(run) <= 19 && luhnValid(run) {
			return true
		}
	}
	return false
}

// digitRuns returns the runs of digits in s, as ASCII digits: digits
// (full-width ones too) with at most one space or dash between each two.
func digitRuns(s string) []string {
	var (
		runs []string
		cur  []byte
		sep  bool // the previous character was a separator after a digit
	)
	flush := func() {
		if len(cur) > 0 {
			runs = append(runs, string(cur))
		}
		cur, sep = cur[:0], false
	}
	for _, r := range s {
		if d, ok := digitOf(r); ok {
			cur, sep = append(cur, d), false
			continue
		}
		if (r == ' ' || r == '-') && len(cur) > 0 && !sep {
			sep = true
			continue
		}
		flush()
	}
	flush()
	return runs
}

// digitsOf returns the digits of s, as ASCII digits, without anything
// between them.
func digitsOf(s string) string {
	var b []byte
	for _, r := range s {
		if d, ok := digitOf(r); ok {
			b = append(b, d)
		}
	}
	return string(b)
}

// digitsOfValue returns the digits of every string (member names
// included, members in sorted order) and number in a JSON value, one
// after the other: the value's digits as a whole.
func digitsOfValue(v any) string {
	var b strings.Builder
	walkStrings(v, 0, func(s string) { b.WriteString(digitsOf(s)) })
	return b.String()
}

// walkStrings calls f with every string, member name and number of a
// JSON value, object members in sorted order.
func walkStrings(v any, depth int, f func(string)) {
	if depth > maxGuardDepth {
		return
	}
	switch x := v.(type) {
	case string:
		f(x)
	case json.Number:
		f(string(x))
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			f(k)
			walkStrings(x[k], depth+1, f)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, depth+1, f)
		}
	case nil, bool:
	default:
		if s, err := stringOf(x); err == nil {
			f(s)
		}
	}
}

// maxGuardDepth bounds the nesting walkStrings follows; an expression's
// value is at most as deep as the engine allows, a template as the
// request decoder does.
const maxGuardDepth = 512

// digitOf returns the ASCII digit a decimal digit stands for: ASCII or
// full-width.
func digitOf(r rune) (byte, bool) {
	switch {
	case r >= '0' && r <= '9':
		return byte(r), true
	case r >= '０' && r <= '９':
		return byte('0' + r - '０'), true
	}
	return 0, false
}

// reverseString returns s, ASCII, reversed.
func reverseString(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}
