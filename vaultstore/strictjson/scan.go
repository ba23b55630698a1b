package strictjson

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Default limits applied by [Validate], [Decode] and [DecodeValue].
const (
	DefaultMaxDepth  = 32      // maximum nesting of objects and arrays
	DefaultMaxValues = 100000  // maximum number of JSON values in a body
	maxValuesCap     = 1 << 30 // the most MaxValues may be (see tblIdxMask)
)

// Limits bounds the shape of an accepted body. A zero or negative field
// selects the corresponding default (DefaultMaxDepth, DefaultMaxValues).
type Limits struct {
	// MaxDepth is the maximum nesting of objects and arrays: a top-level
	// scalar has depth 0, [] and {} have depth 1, [[]] has depth 2.
	MaxDepth int
	// MaxValues is the maximum number of values in the body, counting every
	// object, array, string, number, true, false and null (member names are
	// not values); at most 2^30.
	MaxValues int
}

// DefaultLimits are the limits required by R-IN-2.
var DefaultLimits = Limits{MaxDepth: DefaultMaxDepth, MaxValues: DefaultMaxValues}

func (l Limits) normalize() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxValues <= 0 {
		l.MaxValues = DefaultMaxValues
	}
	l.MaxValues = min(l.MaxValues, maxValuesCap)
	return l
}

// Validate checks that body is exactly one well-formed JSON value (RFC 8259)
// surrounded by optional whitespace and that it respects lim. It rejects
// syntax errors, trailing data, invalid UTF-8 inside strings, unpaired UTF-16
// surrogate escapes such as "\ud800", duplicate member names within an object
// (compared byte-exactly after unescaping, so "a" and "\u0061" are
// duplicates while "a" and "A" are not), nesting deeper than lim.MaxDepth and
// more than lim.MaxValues values.
//
// Validate does not recurse; its stack usage is independent of the input and
// its running time is linear in len(body). The error is always an [*Error].
func Validate(body []byte, lim Limits) error {
	s := getScanner(body, lim, nil)
	err := s.scan()
	putScanner(s)
	if err != nil {
		return err
	}
	return nil
}

// ValidateMarked validates body as [Validate] does and, when it is valid,
// returns every string in value position (an object member's value, an
// array element, or the whole body; never a member name) that holds one
// of the offsets marks, in the order of the body. marks must be sorted in
// ascending order. It lets a caller that searched the raw bytes for
// something find where the hits are without a second pass over the body.
func ValidateMarked(body []byte, lim Limits, marks []int) ([]Marked, error) {
	if len(marks) == 0 {
		return nil, Validate(body, lim)
	}
	s := getScanner(body, lim, nil)
	s.marks = marks
	err := s.scan()
	marked := s.marked
	putScanner(s)
	if err != nil {
		return nil, err
	}
	return marked, nil
}

// Marked is a string that [ValidateMarked] reports.
type Marked struct {
	Start, End int        // the string literal, quotes included, is body[Start:End]
	Path       []PathStep // from the outermost container in; empty for the whole body
}

// PathStep is one step of a [Marked] string's path: a member of an object,
// by its unescaped name, or an element of an array, by its index.
type PathStep struct {
	Name  string
	Index int // -1 for a member
}

// keyRef locates the unescaped bytes of a member name, either in the body
// (names without escapes) or in the scanner's arena.
type keyRef struct {
	start, end int
	// sum is the keyTail of the name while isDup searches its object
	// linearly, then the high 32 bits of its hash in the object's table.
	sum   uint32
	arena bool
}

// frame is an open object or array.
type frame struct {
	start int      // offset of the opening bracket
	keys  int      // len(scanner.keys) when the container was opened
	arena int      // len(scanner.arena) when the container was opened
	n     int      // array: index of the current element
	tbl   []uint64 // object with many members: set of its keys, see tblInsert
	tblN  int      // number of entries in tbl
	plan  *plan    // decode plan of the container (Decode only)
	obj   bool
}

// scanner holds the reusable state of one scan.
type scanner struct {
	data    []byte
	lim     Limits
	root    *plan
	stack   []frame
	keys    []keyRef
	arena   []byte
	tblFree [][]uint64
	fold    []byte
	blanks  []int // Decode: [start,end) ranges of member names to blank out
	seed    maphash.Seed

	// ValidateMarked: the offsets to report strings for, the first not yet
	// passed, and the strings found.
	marks    []int
	nextMark int
	marked   []Marked

	// Locate mode (error paths only): find the innermost value v with
	// v.start < target <= v.end and record its path.
	locate    bool
	target    int
	found     bool
	foundPath string
}

var scannerPool = sync.Pool{New: func() any { return &scanner{seed: maphash.MakeSeed()} }}

func getScanner(data []byte, lim Limits, root *plan) *scanner {
	s := scannerPool.Get().(*scanner)
	s.data = data
	s.lim = lim.normalize()
	s.root = root
	return s
}

func putScanner(s *scanner) {
	clear(s.stack[:cap(s.stack)]) // drop plan and table references
	s.stack = s.stack[:0]
	s.keys = s.keys[:0]
	s.arena = s.arena[:0]
	s.blanks = s.blanks[:0]
	s.data = nil
	s.root = nil
	s.locate, s.found, s.foundPath = false, false, ""
	s.marks, s.nextMark, s.marked = nil, 0, nil
	// Do not let one huge body pin large buffers in the pool.
	if cap(s.keys) > 1<<12 {
		s.keys = nil
	}
	if cap(s.arena) > 1<<14 {
		s.arena = nil
	}
	if cap(s.blanks) > 1<<10 {
		s.blanks = nil
	}
	if len(s.tblFree) > 8 {
		clear(s.tblFree[8:])
		s.tblFree = s.tblFree[:8]
	}
	for i, t := range s.tblFree {
		if cap(t) > 1<<12 {
			s.tblFree[i] = nil
		}
	}
	scannerPool.Put(s)
}

// Internal error codes of the low-level scanning helpers.
const (
	codeOK = iota
	codeSyntax
	codeEOF
	codeUTF8
	codeSurrogate
)

// linearMax is the member count up to which duplicate names are found by a
// linear search; larger objects switch to a hash set.
const linearMax = 16

func (s *scanner) syntax(off int) *Error {
	return bodyError("invalid JSON at offset " + strconv.Itoa(off))
}

func (s *scanner) eof() *Error { return bodyError("unexpected end of JSON input") }

// stringError converts a string-scanning failure. inKey reports whether the
// string is a member name (whose path is that of the enclosing object).
func (s *scanner) stringError(code, off int, inKey bool) *Error {
	depth := len(s.stack)
	if inKey {
		depth--
	}
	switch code {
	case codeEOF:
		return s.eof()
	case codeUTF8:
		return fieldError(s.path(depth), "invalid UTF-8")
	case codeSurrogate:
		return fieldError(s.path(depth), "unpaired UTF-16 surrogate escape")
	}
	return s.syntax(off)
}

// scan validates s.data. In decode mode (s.root != nil) it also records, in
// s.blanks, the member names that encoding/json would match to a struct field
// only case-insensitively.
func (s *scanner) scan() *Error {
	data := s.data
	n := len(data)
	maxDepth, maxValues := s.lim.MaxDepth, s.lim.MaxValues
	values := 0
	next := s.root // decode plan of the next value
	i := skipWS(data, 0)

value:
	for {
		// A value starts at i.
		if i >= n {
			return s.eof()
		}
		values++
		if values > maxValues {
			return bodyError("more than " + strconv.Itoa(maxValues) + " values")
		}
		vstart := i
		switch c := data[i]; c {
		case '{', '[':
			if len(s.stack) >= maxDepth {
				return bodyError("nesting deeper than " + strconv.Itoa(maxDepth))
			}
			obj := c == '{'
			p := next
			if p != nil && (p.kind == planSeq) == obj {
				p = nil // type mismatch: encoding/json reports it, nothing to track
			}
			s.stack = append(s.stack, frame{start: i, keys: len(s.keys), arena: len(s.arena), plan: p, obj: obj})
			i = skipWS(data, i+1)
			if i >= n {
				return s.eof()
			}
			if obj {
				if data[i] != '}' {
					var err *Error
					if i, next, err = s.member(i); err != nil {
						return err
					}
					continue value
				}
			} else if data[i] != ']' {
				next = nil
				if p != nil {
					next = p.elem
				}
				continue value
			}
			i++ // empty container
			s.pop()
		case '"':
			end, _, code := scanString(data, i)
			if code != codeOK {
				return s.stringError(code, end, false)
			}
			if s.marks != nil {
				s.mark(i, end)
			}
			i = end + 1
		case 't':
			if i = scanLiteral(data, i, "true"); i < 0 {
				return s.literalError(-i)
			}
		case 'f':
			if i = scanLiteral(data, i, "false"); i < 0 {
				return s.literalError(-i)
			}
		case 'n':
			if i = scanLiteral(data, i, "null"); i < 0 {
				return s.literalError(-i)
			}
		default:
			var code int
			if i, code = scanNumber(data, i); code != codeOK {
				if code == codeEOF {
					return s.eof()
				}
				return s.syntax(i)
			}
		}

		// A value ended just before i; vstart is where it began.
		for {
			if s.locate && vstart < s.target && s.target <= i {
				s.found = true
				s.foundPath = s.path(len(s.stack))
				return nil
			}
			i = skipWS(data, i)
			if len(s.stack) == 0 {
				if i != n {
					return bodyError("trailing data at offset " + strconv.Itoa(i))
				}
				return nil
			}
			if i >= n {
				return s.eof()
			}
			f := &s.stack[len(s.stack)-1]
			switch c := data[i]; {
			case c == ',':
				i = skipWS(data, i+1)
				if f.obj {
					var err *Error
					if i, next, err = s.member(i); err != nil {
						return err
					}
				} else {
					f.n++
					next = nil
					if f.plan != nil {
						next = f.plan.elem
					}
				}
				continue value
			case f.obj && c == '}' || !f.obj && c == ']':
				vstart = f.start
				i++
				s.pop()
			default:
				return s.syntax(i)
			}
		}
	}
}

func (s *scanner) literalError(off int) *Error {
	if off >= len(s.data) {
		return s.eof()
	}
	return s.syntax(off)
}

// mark records the string value from the quote at start to the one at
// end when a mark falls inside it.
func (s *scanner) mark(start, end int) {
	for s.nextMark < len(s.marks) && s.marks[s.nextMark] < start {
		s.nextMark++
	}
	if s.nextMark == len(s.marks) || s.marks[s.nextMark] >= end {
		return
	}
	steps := make([]PathStep, len(s.stack))
	for j := range s.stack {
		f := &s.stack[j]
		if !f.obj {
			steps[j] = PathStep{Index: f.n}
			continue
		}
		steps[j] = PathStep{Name: string(s.memberName(j)), Index: -1}
	}
	s.marked = append(s.marked, Marked{Start: start, End: end + 1, Path: steps})
}

// pop closes the innermost container.
func (s *scanner) pop() {
	f := &s.stack[len(s.stack)-1]
	if f.tbl != nil {
		clear(f.tbl)
		s.tblFree = append(s.tblFree, f.tbl)
	}
	s.keys = s.keys[:f.keys]
	s.arena = s.arena[:f.arena]
	*f = frame{}
	s.stack = s.stack[:len(s.stack)-1]
}

// member scans `"name" :` at i inside the innermost object and returns the
// offset of the member's value and that value's decode plan.
func (s *scanner) member(i int) (int, *plan, *Error) {
	data := s.data
	if i >= len(data) {
		return i, nil, s.eof()
	}
	if data[i] != '"' {
		return i, nil, s.syntax(i)
	}
	end, esc, code := scanString(data, i)
	if code != codeOK {
		return i, nil, s.stringError(code, end, true)
	}
	k := keyRef{start: i + 1, end: end}
	if esc {
		a := len(s.arena)
		s.arena = appendUnescaped(s.arena, data[i+1:end])
		k = keyRef{start: a, end: len(s.arena), arena: true}
	}
	s.keys = append(s.keys, k)
	f := &s.stack[len(s.stack)-1]
	if s.isDup(f, len(s.keys)-1) {
		return i, nil, fieldError(s.path(len(s.stack)), "duplicate member name "+quoteName(s.keyBytes(k)))
	}

	var next *plan
	if p := f.plan; p != nil {
		name := s.keyBytes(k)
		if p.kind == planMap {
			next = p.elem
		} else if child, ok := p.fields[string(name)]; ok {
			next = child
		} else {
			s.fold = appendFolded(s.fold[:0], name)
			if _, ok := p.folded[string(s.fold)]; ok {
				// encoding/json would match this name case-insensitively:
				// blank it so that it is ignored as an unknown member.
				s.blanks = append(s.blanks, i+1, end)
			}
		}
	}

	i = skipWS(data, end+1)
	if i >= len(data) {
		return i, nil, s.eof()
	}
	if data[i] != ':' {
		return i, nil, s.syntax(i)
	}
	return skipWS(data, i+1), next, nil
}

func (s *scanner) keyBytes(k keyRef) []byte {
	if k.arena {
		return s.arena[k.start:k.end]
	}
	return s.data[k.start:k.end]
}

// isDup reports whether key ki duplicates an earlier member of object f.
func (s *scanner) isDup(f *frame, ki int) bool {
	k := s.keyBytes(s.keys[ki])
	if f.tbl == nil {
		if ki-f.keys < linearMax {
			// Compare the bytes only of names of the same length and tail.
			t := keyTail(k)
			s.keys[ki].sum = t
			for _, r := range s.keys[f.keys:ki] {
				if r.sum == t && r.end-r.start == len(k) && string(s.keyBytes(r)) == string(k) {
					return true
				}
			}
			return false
		}
		f.tbl = s.newTable(4 * linearMax)
		for j := f.keys; j < ki; j++ {
			s.tblInsert(f, j, s.keyBytes(s.keys[j]))
		}
	}
	return s.tblInsert(f, ki, k)
}

// keyTail returns the last four bytes of k, or all of k if it is shorter.
func keyTail(k []byte) uint32 {
	if len(k) >= 4 {
		return binary.LittleEndian.Uint32(k[len(k)-4:])
	}
	var t uint32
	for _, c := range k {
		t = t<<8 | uint32(c)
	}
	return t
}

func (s *scanner) newTable(size int) []uint64 {
	for j := len(s.tblFree) - 1; j >= 0; j-- {
		if t := s.tblFree[j]; cap(t) >= size {
			s.tblFree[j] = s.tblFree[len(s.tblFree)-1]
			s.tblFree[len(s.tblFree)-1] = nil
			s.tblFree = s.tblFree[:len(s.tblFree)-1]
			return t[:size]
		}
	}
	return make([]uint64, size)
}

// The set of the keys of an object is an open-addressing hash table with
// linear probing, at most half full, whose size is a power of two. A slot
// holds 0 when empty; otherwise its low 32 bits hold ki-f.keys+1 for the key
// s.keys[ki] and its high 32 bits the key's tag: the high 32 bits of its
// maphash, which is also kept in s.keys[ki].sum. The low bits of the tag give
// the key's home slot. A probe compares key bytes only when the tags match,
// and growth moves the keys by their sums without hashing them again. The keys
// in the table of f are always s.keys[f.keys:f.keys+f.tblN], since a
// duplicate ends the scan.
//
// An object has fewer members than the body has values, and normalize caps
// MaxValues at maxValuesCap, so 32 bits always hold the index.
const tblIdxMask = 1<<32 - 1

// tblInsert adds key ki, whose bytes are k, to the set of f and reports
// whether an equal key was already present (in which case nothing is added).
func (s *scanner) tblInsert(f *frame, ki int, k []byte) bool {
	if 2*(f.tblN+1) > len(f.tbl) {
		s.tblGrow(f)
	}
	h := maphash.Bytes(s.seed, k)
	tbl := f.tbl
	mask := uint64(len(tbl) - 1)
	s.keys[ki].sum = uint32(h >> 32)
	e := h&^tblIdxMask | uint64(ki-f.keys+1)
	for p := h >> 32 & mask; ; p = (p + 1) & mask {
		x := tbl[p]
		if x == 0 {
			tbl[p] = e
			f.tblN++
			return false
		}
		if (x^e)&^tblIdxMask == 0 {
			r := s.keys[f.keys+int(x&tblIdxMask)-1]
			if r.end-r.start == len(k) && string(s.keyBytes(r)) == string(k) {
				return true
			}
		}
	}
}

// tblGrow doubles the size of the table of f.
func (s *scanner) tblGrow(f *frame) {
	old := f.tbl
	tbl := s.newTable(2 * len(old))
	mask := uint64(len(tbl) - 1)
	keys := s.keys[f.keys : f.keys+f.tblN] // the keys in the table
	for j, r := range keys {
		p := uint64(r.sum) & mask
		for tbl[p] != 0 {
			p = (p + 1) & mask
		}
		tbl[p] = uint64(r.sum)<<32 | uint64(j+1)
	}
	clear(old)
	s.tblFree = append(s.tblFree, old)
	f.tbl = tbl
}

// path renders the location of the current value in the outermost depth
// frames: member names joined by dots, array indexes in brackets.
func (s *scanner) path(depth int) string {
	var b []byte
	for j := 0; j < depth; j++ {
		f := &s.stack[j]
		if !f.obj {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(f.n), 10)
			b = append(b, ']')
			continue
		}
		name := s.memberName(j)
		if plainName(name) {
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, name...)
		} else {
			b = append(b, '[')
			b = append(b, quoteName(name)...)
			b = append(b, ']')
		}
	}
	return string(b)
}

// memberName is the name of the current member of the object open at
// depth j.
func (s *scanner) memberName(j int) []byte {
	last := len(s.keys)
	if j+1 < len(s.stack) {
		last = s.stack[j+1].keys
	}
	return s.keyBytes(s.keys[last-1])
}

// maxQuotedName bounds how much of a member name is shown in errors.
const maxQuotedName = 64

func plainName(name []byte) bool {
	if len(name) == 0 || len(name) > maxQuotedName {
		return false
	}
	for _, r := range string(name) {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '$') {
			return false
		}
	}
	return true
}

// quoteName quotes a member name for an error, truncating long names.
func quoteName(name []byte) string {
	if len(name) > maxQuotedName {
		return strconv.Quote(string(name[:maxQuotedName])) + "..."
	}
	return strconv.Quote(string(name))
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanLiteral matches lit at i and returns the offset after it, or the
// negated offset of the first mismatching byte.
func scanLiteral(data []byte, i int, lit string) int {
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	for j := 0; j < len(lit); j++ {
		if i+j >= len(data) || data[i+j] != lit[j] {
			return -(i + j)
		}
	}
	return -i // unreachable
}

// scanNumber scans an RFC 8259 number at i and returns the offset after it,
// or the offset of the offending byte and an error code.
func scanNumber(data []byte, i int) (int, int) {
	n := len(data)
	if data[i] == '-' {
		i++
		if i >= n {
			return i, codeEOF
		}
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i++
		for i < n && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	default:
		return i, codeSyntax
	}
	if i < n && data[i] == '.' {
		i++
		if i >= n {
			return i, codeEOF
		}
		if data[i] < '0' || data[i] > '9' {
			return i, codeSyntax
		}
		for i < n && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= n {
			return i, codeEOF
		}
		if data[i] < '0' || data[i] > '9' {
			return i, codeSyntax
		}
		for i < n && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	}
	return i, codeOK
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// scanString scans the string whose opening quote is at i. It returns the
// offset of the closing quote and whether the string contains escapes, or an
// error code and the offset of the offending byte.
func scanString(data []byte, i int) (end int, esc bool, code int) {
	n := len(data)
	i++
	for {
		// Skip 8 plain ASCII bytes at a time: no quote, backslash, control
		// character or non-ASCII byte. The lowest flagged byte is always a
		// true hit, so the jump below never skips a special byte.
		for i+8 <= n {
			x := binary.LittleEndian.Uint64(data[i:])
			q := x ^ (lsb * '"')
			b := x ^ (lsb * '\\')
			m := (((x - lsb*0x20) &^ x) | ((q - lsb) &^ q) | ((b - lsb) &^ b) | x) & msb
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= n {
			return n, esc, codeEOF
		}
		switch c := data[i]; {
		case c == '"':
			return i, esc, codeOK
		case c == '\\':
			esc = true
			if i+1 >= n {
				return n, esc, codeEOF
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, off, code := hex4(data, i+2)
				if code != codeOK {
					return off, esc, code
				}
				i += 6
				switch {
				case utf16.IsSurrogate(r) && r < 0xdc00:
					// A high surrogate must be followed by \u and a low one.
					if i+1 < n && data[i] == '\\' && data[i+1] == 'u' {
						r2, off, code := hex4(data, i+2)
						if code != codeOK {
							return off, esc, code
						}
						if 0xdc00 <= r2 && r2 <= 0xdfff {
							i += 6
							continue
						}
					} else if i+1 >= n && (i >= n || data[i] == '\\') {
						return n, esc, codeEOF
					}
					return i - 6, esc, codeSurrogate
				case utf16.IsSurrogate(r):
					return i - 6, esc, codeSurrogate
				}
			default:
				return i + 1, esc, codeSyntax
			}
		case c < 0x20:
			return i, esc, codeSyntax
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return i, esc, codeUTF8
			}
			i += size
		}
	}
}

// hex4 decodes the four hex digits at i.
func hex4(data []byte, i int) (rune, int, int) {
	var r rune
	for j := i; j < i+4; j++ {
		if j >= len(data) {
			return 0, j, codeEOF
		}
		c := data[j]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, j, codeSyntax
		}
		r = r<<4 | rune(c)
	}
	return r, i + 4, codeOK
}

// appendUnescaped appends the unescaped form of the (already validated)
// string contents src to dst.
func appendUnescaped(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c != '\\' {
			j := i + 1
			for j < len(src) && src[j] != '\\' {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
			continue
		}
		switch src[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _, _ := hex4(src, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				r2, _, _ := hex4(src, i+2)
				r = utf16.DecodeRune(r, r2)
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, src[i+1])
		}
		i += 2
	}
	return dst
}
