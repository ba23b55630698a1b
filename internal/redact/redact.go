// Package redact is the vault's one policy for keeping numbers that may
// be data (card, account or social security numbers) out of what it
// writes about a request: error messages and problem details, logs,
// audit records and webhook payloads. Field paths, member names, token
// ids and transform messages echo what a caller sent, and a caller may
// send a card number where a name or an id belongs.
//
// The policy:
//
//   - A run of MinDigits (7) or more digits may be data and is never
//     shown. Spaces and dashes between digits belong to the run, so
//     "4242 4242-4242 4242" and "123-45-6789" are runs of 16 and 9.
//     Seven is shorter than any card number (12 to 19 digits), a US
//     social security number (9) or a usual account number, and longer
//     than the figures the vault's own messages quote (limits such as
//     100000).
//   - A UUID (8-4-4-4-12 hexadecimal digits, the form of the ids the vault
//     makes) is an identifier, never data: it is shown whole, whatever
//     digits it holds. Nothing else is exempt.
//   - In text, each run is replaced by Mark; the rest stays as it was.
//     An identifier that holds a run is withheld whole (Withheld): half
//     an id names nothing.
package redact

// MinDigits is the shortest run of digits that is redacted.
const MinDigits = 7

// Mark stands in text for a redacted run of digits.
const Mark = "…"

// Withheld stands for an identifier that holds a run of digits.
const Withheld = "(id not shown)"

// Text returns s with every run of MinDigits or more digits (spaces and
// dashes between them included) replaced by Mark; UUIDs stay whole. s
// itself is returned when nothing is redacted.
func Text(s string) string {
	i := firstRun(s)
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for i < len(s) {
		if n := uuidAt(s, i); n > 0 {
			b = append(b, s[i:i+n]...)
			i += n
			continue
		}
		if !isDigit(s[i]) {
			b = append(b, s[i])
			i++
			continue
		}
		end, digits := runAt(s, i)
		if digits >= MinDigits {
			b = append(b, Mark...)
		} else {
			b = append(b, s[i:end]...)
		}
		i = end
	}
	return string(b)
}

// ID returns id, or Withheld when it holds a run of MinDigits or more
// digits (a UUID never does).
func ID(id string) string {
	if firstRun(id) >= 0 {
		return Withheld
	}
	return id
}

// IDs applies ID to each id, in a new slice.
func IDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = ID(id)
	}
	return out
}

// Holds reports whether s holds a run of digits the policy redacts.
func Holds(s string) bool { return firstRun(s) >= 0 }

// firstRun returns where the first redacted run of s starts, or -1.
func firstRun(s string) int {
	for i := 0; i < len(s); {
		if n := uuidAt(s, i); n > 0 {
			i += n
			continue
		}
		if !isDigit(s[i]) {
			i++
			continue
		}
		end, digits := runAt(s, i)
		if digits >= MinDigits {
			return i
		}
		i = end
	}
	return -1
}

// runAt measures the run of digits starting at s[i], a digit: where it
// ends (after its last digit: separators after it are not part of it)
// and how many digits it holds. A UUID starting inside ends the run.
func runAt(s string, i int) (end, digits int) {
	end = i
	for j := i; j < len(s) && (isDigit(s[j]) || s[j] == ' ' || s[j] == '-'); j++ {
		if j > i && uuidAt(s, j) > 0 {
			break
		}
		if isDigit(s[j]) {
			digits++
			end = j + 1
		}
	}
	return end, digits
}

// uuidLen is the length of a UUID's text form.
const uuidLen = 36

// uuidAt returns uuidLen when a UUID starts at s[i] and stands alone
// (no letter, digit or underscore right before or after it), else 0.
func uuidAt(s string, i int) int {
	if len(s)-i < uuidLen || i > 0 && isWord(s[i-1]) || len(s)-i > uuidLen && isWord(s[i+uuidLen]) {
		return 0
	}
	for k := 0; k < uuidLen; k++ {
		c := s[i+k]
		switch k {
		case 8, 13, 18, 23:
			if c != '-' {
				return 0
			}
		default:
			if !isHex(c) {
				return 0
			}
		}
	}
	return uuidLen
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isWord(c byte) bool { return isHex(c) || c >= 'g' && c <= 'z' || c >= 'G' && c <= 'Z' || c == '_' }
